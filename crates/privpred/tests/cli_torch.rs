//! `--engine cpu|torch` of ResNet training. With `--features torch`, a tiny ResNet trains on
//! a few hundred real CIFAR-10 images through the libtorch engine (CUDA when present, CPU
//! otherwise) and the artifact evaluates like any other; the engine and its device are in the
//! summary and the artifact. Without the feature, asking for `torch` is a usage error naming
//! the build command; unknown engine names and `--engine` on a linear model exit 2 in every
//! build.

mod common;

use common::assert_bad;
#[cfg(feature = "torch")]
use common::{json_of, privpred, small_cifar};
#[cfg(feature = "nn")]
use common::{privpred_env, stderr};

#[test]
fn engine_on_a_linear_model_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.safetensors");
    assert_bad(
        &[
            "train",
            "non-private",
            "--dataset",
            "digits",
            "--engine",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ],
        "--engine applies to ResNet models only",
    );
    assert!(!out.exists());
}

#[cfg(feature = "nn")]
#[test]
fn unknown_engines_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.safetensors");
    let o = out.to_str().unwrap();
    let base = [
        "train",
        "non-private",
        "--model",
        "resnet-tiny",
        "--dataset",
        "cifar10",
        "--out",
        o,
    ];
    let mut args = base.to_vec();
    args.extend(["--engine", "gpu"]);
    // clap checks --engine (EngineArg): exit 2 naming the value and the valid ones
    assert_bad(&args, "invalid value 'gpu' for '--engine <ENGINE>'");
    assert_bad(&args, "[possible values: cpu, torch]");
    let r = privpred_env(&base, &[("PRIVPRED_NN_ENGINE", "tpu")]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("PRIVPRED_NN_ENGINE"), "{}", stderr(&r));
    assert!(!out.exists());
}

#[cfg(all(feature = "nn", not(feature = "torch")))]
#[test]
fn torch_without_the_feature_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.safetensors");
    assert_bad(
        &[
            "train",
            "non-private",
            "--model",
            "resnet-tiny",
            "--dataset",
            "cifar10",
            "--engine",
            "torch",
            "--out",
            out.to_str().unwrap(),
        ],
        "--features torch",
    );
    // figure 7 through the environment variable: refused before any work
    let r = privpred_env(
        &[
            "reproduce",
            "fig7a",
            "--quick",
            "--out",
            dir.path().join("run").to_str().unwrap(),
        ],
        &[("PRIVPRED_NN_ENGINE", "torch")],
    );
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("--features torch"), "{}", stderr(&r));
}

#[cfg(feature = "torch")]
#[test]
fn dp_sgd_resnet_trains_on_the_torch_engine_and_evaluates() {
    let dir = tempfile::tempdir().unwrap();
    let Some(folder) = small_cifar(
        dir.path(),
        "cli_torch::dp_sgd_resnet_trains_on_the_torch_engine_and_evaluates",
    ) else {
        return;
    };
    let data = format!("images:{}", folder.display());
    let model = dir.path().join("dp.safetensors");
    let m = model.to_str().unwrap();
    let t = json_of(&privpred(&[
        "train",
        "dp-sgd",
        "--model",
        "resnet-tiny",
        "--dataset",
        &data,
        "--epochs",
        "1",
        "--batch-size",
        "50",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--seed",
        "1",
        "--engine",
        "torch",
        "--out",
        m,
        "--json",
    ]));
    assert_eq!(t["method"], "dp-sgd");
    assert_eq!(t["engine"], "torch");
    assert!(t["device"].is_string());
    assert_eq!(t["n"], 300);
    assert_eq!(t["valid_guarantee"], true);
    assert!(t["noise_multiplier"].as_f64().unwrap() > 0.5);
    let e = json_of(&privpred(&[
        "evaluate",
        "--model",
        m,
        "--dataset",
        &data,
        "--json",
    ]));
    assert_eq!(e["method"], "dp-sgd");
    assert_eq!(e["epsilon"], 1.0);
    let acc = e["accuracy"]["mean"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&acc));
    // the default engine of a torch build is torch on a CUDA machine, else privpred-nn's own
    // (faster for DP-SGD on the CPU); either stays available by name
    let np = dir.path().join("np.safetensors");
    let t = json_of(&privpred(&[
        "train",
        "non-private",
        "--model",
        "resnet-tiny",
        "--dataset",
        &data,
        "--epochs",
        "2",
        "--batch-size",
        "50",
        "--seed",
        "2",
        "--out",
        np.to_str().unwrap(),
        "--json",
    ]));
    let cuda = std::env::var("PRIVPRED_DEVICE").is_ok_and(|v| v.starts_with("cuda"))
        || t["device"].as_str().is_some_and(|d| d.starts_with("cuda"));
    assert_eq!(t["engine"], if cuda { "torch" } else { "cpu" });
    let r = privpred_env(
        &[
            "train",
            "non-private",
            "--model",
            "resnet-tiny",
            "--dataset",
            &data,
            "--epochs",
            "1",
            "--batch-size",
            "50",
            "--seed",
            "2",
            "--out",
            np.to_str().unwrap(),
            "--json",
        ],
        &[("PRIVPRED_NN_ENGINE", "cpu")],
    );
    assert_eq!(json_of(&r)["engine"], "cpu");
    // a bad device is a usage error
    let r = privpred_env(
        &[
            "train",
            "non-private",
            "--model",
            "resnet-tiny",
            "--dataset",
            &data,
            "--engine",
            "torch",
            "--out",
            dir.path().join("x.safetensors").to_str().unwrap(),
        ],
        &[("PRIVPRED_DEVICE", "cuda:99")],
    );
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("cuda:99"), "{}", stderr(&r));
}

/// The `privpred` binary loads libtorch's CUDA backend whenever its libtorch has one (the link
/// step dropped it before crates/privpred/build.rs, so libtorch saw no GPU on a GPU machine).
#[cfg(all(feature = "torch", target_os = "linux"))]
#[test]
fn the_binary_loads_the_cuda_backend_whenever_libtorch_has_one() {
    let o = std::process::Command::new("ldd")
        .arg(common::BIN)
        .output()
        .expect("ldd runs");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let cpu = text
        .lines()
        .filter_map(|l| l.split("=>").nth(1))
        .filter_map(|r| r.split_whitespace().next())
        .find(|p| p.ends_with("/libtorch_cpu.so"))
        .unwrap_or_else(|| panic!("libtorch_cpu.so resolved by ldd:\n{text}"))
        .to_string();
    let dir = std::path::Path::new(&cpu).parent().expect("a directory");
    if dir.join("libtorch_cuda.so").exists() {
        assert!(
            text.contains("libtorch_cuda.so"),
            "{} has libtorch_cuda.so but privpred does not load it:\n{text}",
            dir.display()
        );
    }
}
