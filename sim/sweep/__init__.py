"""Parameter sweeps: the cartesian product of a grid over a base config, run in local processes or
on Ray, stored crash-safe as one row per point in `results.parquet`, resumable, with standard plots.

Modules: `grid` (parse, expand, point ids), `point` (one point -> one row), `backends` (local
process pool, Ray), `store` (parts + results.parquet), `runner` (skip finished, run, store), `plots`.
Nothing is imported here, so workers that only need `point` stay light."""
