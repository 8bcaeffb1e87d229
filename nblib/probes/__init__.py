"""probes: the experiments behind the book's design choices, and their records.

A probe trains or scores a few models outside the book's grid (a scratch store, or the book's
store read) to decide a design choice, and appends its measurements as records that the
chapters read. One module per probe, each with a `main(argv)`; one entry point:

    python -m nblib.probes               # lists the probes
    python -m nblib.probes lccp_lr --help

    probe               chapter  records (data/probes/)                          was benchmarks/
    design              2        toy_design_probe                                toy_design_probe.py
    lr_batch            2        toy_lr_batch_probe, toy_smear_ablation,         toy_lr_batch_probe.py
                                 toy_grid_shapes
    lccp_copy           2        toy_lccp_copy_probe                             toy_lccp_copy_probe.py
    lccp_lr             2        toy_lccp_lr_probe, toy_lccp_rope_probe,         toy_lccp_lr_probe.py
                                 toy_s2_heads_probe
    cpu_kernel          2        cpu_kernel_probe                                cpu_kernel_probe.py
    grid_ladder         2        toy_grid_ladder.csv                             (rows measured by hand)
    n_axis              2        toy_n_axis_probe                                (new)
    short_seeds         11       toy_short_seeds                                 (new)
    erosion             2        toy_erosion_probe                               (new)
    trajectory_copy     4        toy_trajectory_copy_probe                       toy_trajectory_copy_probe.py
    protocol_horizon    4        toy_protocol_horizon                            (new)
    ruler_copy          5        toy_ruler_copy_probe                            toy_ruler_copy_probe.py
    code_needle_levers  5        toy_code_needle_levers                          toy_code_needle_levers.py
    needle_ladder       5        toy_needle_ladder.csv                           (new)
    pair                6        pair_probe                                      pair_probe.py

The chapters read every record file but cpu_kernel_probe and toy_trajectory_copy_probe, kept as
records of an early one-scale kernel check (the grid's AVX2 / fp32 repeat is design-ladder row
Vb2, chapters 3-4) and of the S5 trajectory's late rise on an earlier grid.

Every record file lives in `RESULTS` (data/probes/) with a manifest beside it naming the
module that writes it and each write's command, commit, time and machine (`results`). The
chapters read them with `records(name)`. Probes build their runs through the grid
(`nblib.lccp.grid`, `configs`) or the pair (`nblib.gemma.pair`), never by hand.

A probe that takes a budget runs on a design of the ladder (a budget file, data/probes/grid_designs/)
through `design_probe` (`python -m nblib.probes.design_probe --budget-file F PROBE ...`) and, for
the code-needle levers, `design_needles`.

The probes may import every package above them in nblib's table (training, lccp, gemma and
below); the chapters' content (nblib.chapters) and the book may import them.
"""

from nblib.probes.results import RESULTS, record_path, records

# probe name -> its module (the entry point imports only the one it runs)
PROBES = {
    "design": "nblib.probes.design",
    "lr_batch": "nblib.probes.lr_batch",
    "lccp_copy": "nblib.probes.lccp_copy",
    "lccp_lr": "nblib.probes.lccp_lr",
    "cpu_kernel": "nblib.probes.cpu_kernel",
    "grid_ladder": "nblib.probes.grid_ladder",
    "n_axis": "nblib.probes.n_axis",
    "short_seeds": "nblib.probes.short_seeds",
    "erosion": "nblib.probes.erosion",
    "trajectory_copy": "nblib.probes.trajectory_copy",
    "protocol_horizon": "nblib.probes.protocol_horizon",
    "ruler_copy": "nblib.probes.ruler_copy",
    "code_needle_levers": "nblib.probes.code_needle_levers",
    "needle_ladder": "nblib.probes.needle_ladder",
    "pair": "nblib.probes.pair",
}

__all__ = ["PROBES", "RESULTS", "record_path", "records"]
