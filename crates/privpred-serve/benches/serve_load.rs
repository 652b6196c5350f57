//! `cargo bench -p privpred-serve --bench serve_load`: the load benchmark of
//! `examples/loadgen.rs` (answers/s and p50/p99 latency with the durable ledger, SQLite and
//! PostgreSQL — the latter when `PRIVPRED_TEST_POSTGRES` is set). Arguments after `--` are
//! passed through (e.g. `-- --batch 16 --seconds 5`).

#[path = "../examples/loadgen.rs"]
mod loadgen;

fn main() {
    loadgen::main();
}
