//! With the feature `torch`, links this package's binaries and tests to `libtorch.so` even
//! though no symbol of it is used directly.
//!
//! torch-sys asks for `-ltorch_cuda`, `-ltorch_cpu`, `-ltorch`, `-lc10`, but the linker's
//! default `--as-needed` drops every library whose symbols the binary does not reference, so a
//! binary built against a CUDA libtorch ended up with only `libtorch_cpu.so` and `libc10.so`:
//! libtorch's CUDA backend (`libtorch_cuda.so`, registered by its static initialisers) was
//! never loaded and `tch::Cuda::is_available()` said false on a GPU machine (tch-rs issues #329
//! and #980 describe the same). `--no-as-needed -ltorch` keeps `libtorch.so`, whose own
//! dependencies bring `libtorch_cuda.so` in a CUDA build and nothing extra in a CPU-only one.
//! `cargo:rustc-link-arg` reaches only this package's targets, so the `privpred` binary has
//! the same build script.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let torch = std::env::var_os("CARGO_FEATURE_TORCH").is_some();
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if torch && linux {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
}
