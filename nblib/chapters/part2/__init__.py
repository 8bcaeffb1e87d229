"""Part 2, the Gemma blog (chapters 6-10): blog_findings, the sentences each chapter states from
its numbers beside the blog's."""
