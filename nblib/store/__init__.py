"""The run store: runs named by a hash of their config, checkpoints checked by sha256, atomic writes.

Modules: atomic (atomic writes, no writes through links), provenance (repository root, code
version), checkpoint (safetensors checkpoints and their COMPLETE.json), runstore (RunConfig,
Run, RunStore, locks). May import nblib.cli (UserError) and nblib.models; it never trains or evaluates.
"""
