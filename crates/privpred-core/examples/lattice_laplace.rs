//! Measurements of the exact lattice ℓ2-Laplace release (`privpred_core::lattice`):
//! the rejection sampler's acceptance rate by dimension, answers per second against the f64
//! ℓ2-Laplace sampler, the distribution of the rejection loop count and whether the draw
//! time depends on the noise drawn, and the noise norm of the ℓ1 law against the f64
//! ℓ2-Laplace at model sensitivity's dimension (7850).
//!
//!     cargo run --release -p privpred-core --example lattice_laplace

use privpred_core::Noise;
use privpred_core::lattice::{
    LatticeRates, lattice_laplace_beta, release_lattice_laplace_counted, sample_lattice_noise,
};
use privpred_core::noise::seeded_rng;
use std::time::Instant;

/// ln Γ(x) by Stirling's series (x ≥ 1; error far below what is printed).
fn ln_gamma(x: f64) -> f64 {
    if x < 7.0 {
        return ln_gamma(x + 1.0) - x.ln();
    }
    (x - 0.5) * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x.powi(3))
}

/// The acceptance rate in the continuous limit (small rate): ∫e^{−b‖x‖₂} / ∫e^{−(b/√d)‖x‖₁}
/// = 2π^{d/2}Γ(d) / (Γ(d/2)(2√d)^d).
fn acceptance_limit(d: usize) -> f64 {
    let d = d as f64;
    (2f64.ln() + 0.5 * d * std::f64::consts::PI.ln() + ln_gamma(d)
        - ln_gamma(d / 2.0)
        - d * (2.0 * d.sqrt()).ln())
    .exp()
}

const SENS: f64 = 2.0 * std::f64::consts::SQRT_2 / (60_000.0 * 1e-2);

fn main() {
    if std::env::args().nth(1).as_deref() == Some("rate") {
        answers_per_second();
        return;
    }
    acceptance();
    answers_per_second();
    timing_channel();
    weights_at_model_sensitivity();
}

fn acceptance() {
    println!(
        "# acceptance rate of the rejection (rate from a calibration at eps = 1, Delta = {SENS:.3e})"
    );
    println!("d\tproposals\taccepted\tmeasured\tcontinuous limit\tus per accepted draw");
    for &(d, budget_s) in &[(2usize, 1.0), (10, 2.0), (16, 4.0), (32, 10.0), (100, 5.0)] {
        let (beta, r) = lattice_laplace_beta(1.0, 1, SENS).unwrap();
        let k = privpred_core::grid::grid_log2(r, d).unwrap();
        let rates = LatticeRates::new(beta, k, d).unwrap();
        let mut rng = seeded_rng(d as u64);
        let t = Instant::now();
        let (mut proposals, mut accepted) = (0u64, 0u64);
        if d <= privpred_core::lattice::LATTICE_L2_MAX_DIM {
            while t.elapsed().as_secs_f64() < budget_s {
                let (_, p) = sample_lattice_noise(&mut rng, &rates).unwrap();
                proposals += p;
                accepted += 1;
            }
        } else {
            // the rejection itself (the release uses the ℓ1 law here): proposals and coins
            while t.elapsed().as_secs_f64() < budget_s {
                let z: Vec<_> = (0..d)
                    .map(|_| {
                        privpred_core::exact::discrete_laplace(&mut rng, rates.scale()).unwrap()
                    })
                    .collect();
                proposals += 1;
                if rates.acceptance(&z).flip(&mut rng) {
                    accepted += 1;
                }
            }
        }
        let el = t.elapsed().as_secs_f64();
        println!(
            "{d}\t{proposals}\t{accepted}\t{:.3e}\t{:.3e}\t{}",
            accepted as f64 / proposals as f64,
            acceptance_limit(d),
            if accepted > 0 {
                format!("{:.1}", 1e6 * el / accepted as f64)
            } else {
                "-".into()
            }
        );
    }
}

fn answers_per_second() {
    println!("\n# answers per second (one process, seeded ChaCha20)");
    println!("d\teps\tf64 l2-Laplace\tlattice (exact)\tratio");
    for &(d, eps) in &[2usize, 10, 16]
        .iter()
        .flat_map(|&d| [0.1, 1.0, 10.0].map(|e| (d, e)))
        .collect::<Vec<_>>()
    {
        let (beta, rounding) = lattice_laplace_beta(eps, 1, SENS).unwrap();
        let f64_noise = Noise::L2Laplace { beta: eps / SENS };
        let lattice = Noise::DiscreteL2Laplace { beta, rounding };
        let per_s = |noise: &Noise, secs: f64| -> f64 {
            let mut rng = seeded_rng(7);
            let t = Instant::now();
            let mut n = 0u64;
            let mut sink = 0.0;
            while t.elapsed().as_secs_f64() < secs {
                let mut v = [0.3; 16];
                noise.add_to(&mut rng, &mut v[..d]).unwrap();
                sink += v[0];
                n += 1;
            }
            std::hint::black_box(sink);
            n as f64 / t.elapsed().as_secs_f64()
        };
        let (a, b) = (per_s(&f64_noise, 0.5), per_s(&lattice, 1.5));
        println!("{d}\t{eps}\t{a:.0}\t{b:.0}\t{:.1}", a / b);
    }
}

fn timing_channel() {
    println!("\n# timing channel, d = 10, eps = 1: 20000 draws");
    let (beta, rounding) = lattice_laplace_beta(1.0, 1, SENS).unwrap();
    let mut rng = seeded_rng(11);
    let mut rows: Vec<(u64, f64, f64)> = Vec::new(); // (proposals, ‖noise‖ in grid units, ns)
    let g = 2f64.powi(privpred_core::grid::grid_log2(rounding, 10).unwrap());
    for _ in 0..20_000 {
        let mut v = [0.0; 10];
        let t = Instant::now();
        let p = release_lattice_laplace_counted(&mut rng, &mut v, beta, rounding).unwrap();
        let ns = t.elapsed().as_nanos() as f64;
        let norm = v.iter().map(|x| (x / g).powi(2)).sum::<f64>().sqrt();
        rows.push((p, norm, ns));
    }
    let n = rows.len() as f64;
    let mean = |f: &dyn Fn(&(u64, f64, f64)) -> f64| rows.iter().map(f).sum::<f64>() / n;
    let (mp, mn, mt) = (mean(&|r| r.0 as f64), mean(&|r| r.1), mean(&|r| r.2));
    let cov =
        |f: &dyn Fn(&(u64, f64, f64)) -> f64,
         m1: f64,
         h: &dyn Fn(&(u64, f64, f64)) -> f64,
         m2: f64| { rows.iter().map(|r| (f(r) - m1) * (h(r) - m2)).sum::<f64>() / n };
    let corr =
        |f: &dyn Fn(&(u64, f64, f64)) -> f64,
         m1: f64,
         h: &dyn Fn(&(u64, f64, f64)) -> f64,
         m2: f64| { cov(f, m1, h, m2) / (cov(f, m1, f, m1) * cov(h, m2, h, m2)).sqrt() };
    println!("mean proposals {mp:.2} (1/acceptance), mean ns {mt:.0}");
    let mut hist = [0u64; 8];
    for r in &rows {
        hist[((r.0 - 1) / 5).min(7) as usize] += 1;
    }
    println!("proposals histogram (1-5, 6-10, ..., >35): {hist:?}");
    println!(
        "corr(proposals, |Z|) = {:.4}  corr(time, |Z|) = {:.4}  corr(time, proposals) = {:.4}",
        corr(&|r| r.0 as f64, mp, &|r| r.1, mn),
        corr(&|r| r.2, mt, &|r| r.1, mn),
        corr(&|r| r.2, mt, &|r| r.0 as f64, mp)
    );
    // time per proposal against the norm: quartiles of |Z|
    let mut sorted: Vec<f64> = rows.iter().map(|r| r.1).collect();
    sorted.sort_by(f64::total_cmp);
    let cuts = [sorted[5000], sorted[10000], sorted[15000]];
    let mut q = [(0.0, 0.0, 0u64); 4];
    for r in &rows {
        let i = cuts.iter().filter(|&&c| r.1 > c).count();
        q[i].0 += r.2;
        q[i].1 += r.0 as f64;
        q[i].2 += 1;
    }
    for (i, (t, p, c)) in q.iter().enumerate() {
        println!(
            "|Z| quartile {}: mean ns {:.0}, mean proposals {:.2}, ns per proposal {:.0}",
            i + 1,
            t / *c as f64,
            p / *c as f64,
            t / p
        );
    }
}

fn weights_at_model_sensitivity() {
    println!("\n# model sensitivity's weights at delta = 0, d = 7850 (MNIST), eps = 1");
    let d = 7850;
    let (beta, rounding) = lattice_laplace_beta(1.0, 1, SENS).unwrap();
    let f64_noise = Noise::L2Laplace { beta: 1.0 / SENS };
    let l1 = Noise::DiscreteL2Laplace { beta, rounding };
    let norms = |noise: &Noise, reps: usize| -> (f64, f64, f64) {
        let mut rng = seeded_rng(13);
        let t = Instant::now();
        let v: Vec<f64> = (0..reps)
            .map(|_| {
                let mut x = vec![0.0; d];
                noise.add_to(&mut rng, &mut x).unwrap();
                x.iter().map(|a| a * a).sum::<f64>().sqrt()
            })
            .collect();
        let m = v.iter().sum::<f64>() / reps as f64;
        let sd = (v.iter().map(|a| (a - m).powi(2)).sum::<f64>() / reps as f64).sqrt();
        (m, sd, t.elapsed().as_secs_f64() / reps as f64)
    };
    let (a, sa, ta) = norms(&f64_noise, 200);
    let (b, sb, tb) = norms(&l1, 200);
    println!(
        "f64 l2-Laplace: mean |noise| {a:.4} (sd {sa:.4}), {:.2} ms per draw; d/beta = {:.4}",
        1e3 * ta,
        d as f64 * SENS
    );
    println!(
        "l1 law on the grid: mean |noise| {b:.4} (sd {sb:.4}), {:.2} ms per draw; ratio {:.4}",
        1e3 * tb,
        b / a
    );
}
