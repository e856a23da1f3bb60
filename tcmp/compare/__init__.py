"""tcmp.compare: `tcmp compare`, op by op, as a pipeline whose stages are the sub-packages, in this order:

- `collect`: find both dumps, bind each dump directory to its graph and model, say what cannot be read;
- `match`: pair each target tensor with its golden (FX dump or fusion-off GE dump), through torchair's rules;
- `judge`: the metrics of a pair and its verdict;
- `report`: the result table's cells and the files written from them (CSV, unmatched, summary, xlsx, page, console);
- `execute`: the driver that plans units of work, runs them on an executor (local processes) and streams the rows
  to the report;
- `cluster`: the same driver on a Ray cluster, each rank compared where its files are.

`records` holds the records passed between the stages and `rules` the rules every stage shares (torchair's graph
behaviours, per-dtype tolerances, cast rounding). A stage imports only the stages before it (tests/test_layers.py).
"""
