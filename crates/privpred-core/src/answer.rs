//! One released answer to a prediction query: the type shared by the linear predictors, the
//! ResNet artifacts and the HTTP service (one definition, so the three cannot disagree).

use serde::{Deserialize, Serialize};

/// One released answer: a label and, where the mechanism allows it, scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The predicted class.
    pub label: u32,
    /// Scores released with the label, where the mechanism allows it: logits of a privately
    /// trained linear model, the noisy logits of prediction sensitivity, class probabilities
    /// of a DP-SGD or non-private network (post-processing of a private model); `None` for
    /// subsample-and-aggregate (the teachers' vote counts are not private).
    pub scores: Option<Vec<f64>>,
}
