//! The `nn` feature boundary: without it, the ResNet figures say how to get them; with it,
//! the deep-model library the figure-7 and artifact paths use is linked and works.

#[cfg(not(feature = "nn"))]
#[test]
fn fig7_without_the_nn_feature_says_how_to_get_it() {
    for fig in ["fig7a", "fig7b"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_privpred"))
            .args(["reproduce", fig, "--quick"])
            .output()
            .expect("runs");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{fig}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("--features nn"));
    }
}

#[cfg(feature = "nn")]
#[test]
fn nn_artifacts_round_trip_through_the_linked_library() {
    use privpred_core::{CalibrationMode, Privacy};
    use privpred_nn::artifact::{self, ModelHeader, ModelKind, NnModel};
    use privpred_nn::{ResNet, ResNetConfig, calib, data::Normalization};
    use rand::SeedableRng;
    let net = ResNet::new(ResNetConfig::tiny(10)).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0);
    let p = net.init_params(&mut rng);
    let cal = calib::dpsgd(
        CalibrationMode::Corrected,
        Privacy::new(1.0, 1e-5).unwrap(),
        1000,
        100,
        1.0,
        10,
    )
    .unwrap();
    let model = NnModel::new(
        ModelHeader {
            kind: ModelKind::DpSgd,
            config: *net.config(),
            normalization: Normalization::generic(3),
            calibration: Some(cal),
            members: 1,
            class_names: None,
            data_source: "test".into(),
        },
        vec![p],
        serde_json::Value::Null,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dpsgd.safetensors");
    artifact::save(&path, &model).unwrap();
    let back = artifact::load(&path).unwrap();
    let row = vec![128.0f32; back.input_dim()];
    let ans = back.predict(&[&row[..]], &mut rng).unwrap();
    assert!(ans[0].label < 10 && ans[0].scores.as_ref().unwrap().len() == 10);
}

#[cfg(feature = "nn")]
#[test]
fn fig7_with_the_nn_feature_goes_through_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fig7a");
    // A shard that owns none of fig7a's groups: the sweep machinery (manifest, results,
    // summary) runs end to end without training a network.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_privpred"))
        .args([
            "reproduce",
            "fig7a",
            "--quick",
            "--shard",
            "999/1000",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("0 units computed"));
    // Bad arguments still exit 2 with the argument named.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_privpred"))
        .args(["reproduce", "fig7b", "--quick", "--shard", "3/2", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--shard"));
}
