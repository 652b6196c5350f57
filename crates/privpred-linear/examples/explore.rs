//! Exploration helper: fits on full MNIST with a few settings and prints test accuracy.
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, load};
use privpred_linear::train::accuracy;
use privpred_linear::{GradNorm, LbfgsOptions, fit_logistic};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let splits = load(&DatasetSpec::Mnist, &LoadOptions::default())?;
    for bias in [false, true] {
        let fitted = Preprocessing {
            bias,
            ..Preprocessing::default()
        }
        .fit(&splits.train, 0)?;
        let train = fitted.apply_train(&splits.train)?;
        let test = fitted.apply(&splits.test)?;
        for (lambda, norm, tol) in [
            (1e-5, GradNorm::Max, 1e-4),
            (1e-5, GradNorm::L2, 1e-4),
            (1e-5, GradNorm::Max, 1e-6),
            (1e-6, GradNorm::Max, 1e-4),
        ] {
            let t = std::time::Instant::now();
            let f = fit_logistic(
                &train,
                lambda,
                None,
                &LbfgsOptions {
                    norm,
                    grad_tol: tol,
                    ..Default::default()
                },
            )?;
            println!(
                "bias {bias} lambda {lambda:e} {norm:?} {tol:e}: acc {:.4} evals {} {:.2}s {:?}",
                accuracy(&f.model, &test)?,
                f.lbfgs.evaluations,
                t.elapsed().as_secs_f64(),
                f.lbfgs.termination
            );
        }
    }
    Ok(())
}
