//! `privpred`: the command-line front end. A thin layer over the library crates; it parses
//! arguments, calls the libraries, and maps errors to exit codes (2 = usage or bad input).

mod cmd;
mod exit;
mod limits;

use clap::{Parser, Subcommand};

/// Private prediction with (ε, δ)-differential privacy for a budget of B answers.
#[derive(Parser)]
#[command(name = "privpred", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Calibrate the noise of a method for (ε, δ) and a budget B.
    Calibrate(cmd::calibrate::Args),
    /// Account the privacy spent by a mechanism (DP-SGD).
    Account(cmd::account::Args),
    /// Obtain, inspect and generate datasets.
    Data(cmd::data::Args),
    /// Train a private model and write it as a signed model file.
    Train(cmd::train::Args),
    /// Evaluate a trained model's test accuracy.
    Evaluate(cmd::evaluate::Args),
    /// Answer prediction queries from a file, spending the budget.
    Predict(cmd::predict::Args),
    /// Reproduce a figure or table of the study.
    Reproduce(cmd::reproduce::Args),
    /// Compare every applicable method at one setting and recommend one.
    Compare(cmd::compare::Args),
    /// Merge shard outputs of `reproduce --shard`.
    Merge(cmd::merge::Args),
    /// Serve a model over HTTP with an enforced, durable inference budget.
    Serve(cmd::serve::Args),
    /// Inspect, back up or reconcile the budget ledger of `predict` and `serve` (show, backup,
    /// reconcile).
    Ledger(cmd::ledger::Args),
    /// The data owner's privacy odometer: a limit per dataset on the total (ε, δ) of the
    /// models trained from it (limit, show).
    Odometer(cmd::odometer::Args),
    /// Empirically audit a method's privacy guarantee (lower bound on ε).
    Audit(cmd::audit::Args),
    /// The owner's keys: `key new` writes a signing key, its verify key and a sealing key.
    Key(cmd::keys::Args),
}

fn main() {
    let cli = Cli::parse();
    // Parse only, run nothing: how the documentation test checks the commands in the docs.
    if std::env::var_os("PRIVPRED_PARSE_ONLY").is_some() {
        return;
    }
    let result = match cli.command {
        Command::Calibrate(a) => cmd::calibrate::run(a),
        Command::Account(a) => cmd::account::run(a),
        Command::Data(a) => cmd::data::run(a),
        Command::Train(a) => cmd::train::run(a),
        Command::Evaluate(a) => cmd::evaluate::run(a),
        Command::Predict(a) => cmd::predict::run(a),
        Command::Reproduce(a) => cmd::reproduce::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Merge(a) => cmd::merge::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Ledger(a) => cmd::ledger::run(a),
        Command::Odometer(a) => cmd::odometer::run(a),
        Command::Audit(a) => cmd::audit::run(a),
        Command::Key(a) => cmd::keys::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {}", exit::render(&e));
        std::process::exit(exit::code(&e));
    }
}
