//! Serving a table's model: the OpenAPI description takes a row's values as numbers or
//! category names; a full batch of rows with long category names fits the default body limit
//! (sized from the schema's longest category); a body over the limit is 413 with a message
//! that says what to do.

mod common;

use common::{ok, serve_model};
use privpred_serve::client::Client;
use serde_json::{Value, json};

/// Two long category names (200 characters each) and a numeric column.
fn long_names() -> (String, String) {
    ("north-".repeat(33) + "xy", "south-".repeat(33) + "xy")
}

#[test]
fn a_full_batch_of_long_category_names_fits_and_openapi_takes_strings() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = long_names();
    assert_eq!(a.len(), 200);
    let schema = json!({"privpred_schema": 1, "header": true, "columns": [
        {"name": "age", "type": "numeric", "min": 0, "max": 100},
        {"name": "region", "type": "categorical", "categories": [a, b]},
        {"name": "y", "type": "label", "classes": ["no", "yes"]}]});
    let sp = d.path().join("s.json");
    std::fs::write(&sp, schema.to_string()).unwrap();
    let mut csv = String::from("age,region,y\n");
    for i in 0..200 {
        let r = if i % 2 == 0 { &a } else { &b };
        let y = if i % 2 == 0 || i % 7 == 0 {
            "yes"
        } else {
            "no"
        };
        csv.push_str(&format!("{},{r},{y}\n", i % 100));
    }
    let cp = d.path().join("t.csv");
    std::fs::write(&cp, csv).unwrap();
    let m = d.path().join("m.safetensors");
    ok(&[
        "train",
        "model-sensitivity",
        "--epsilon",
        "10",
        "--dataset",
        &format!("csv:{}", cp.to_str().unwrap()),
        "--schema",
        sp.to_str().unwrap(),
        "--out",
        m.to_str().unwrap(),
    ]);
    let srv = serve_model(&m, &["--max-batch", "1024"]);
    let mut c = Client::new(srv.addr, None);
    let doc = c.get("/openapi.json").unwrap().json();
    let items = &doc["components"]["schemas"]["PredictRequest"]["properties"]["inputs"]["items"];
    assert_eq!(items["minItems"], 2, "{items}");
    assert_eq!(
        items["items"]["type"],
        json!(["number", "string"]),
        "{items}"
    );
    let info = c.get("/v1/model").unwrap().json();
    let limit = info["max_body_bytes"].as_u64().unwrap();
    // a full batch of 1,024 rows, each with a 200-character category: about 210 KB, over the
    // old limit of 32 bytes per value (1,024 · 2 · 32 + 64 KiB = 131,072 bytes)
    let rows: Vec<Value> = (0..1024)
        .map(|i| json!([i % 100, if i % 2 == 0 { &a } else { &b }]))
        .collect();
    let body = json!({ "inputs": rows }).to_string();
    assert!(
        body.len() > 131_072 && (body.len() as u64) <= limit,
        "{} vs {limit}",
        body.len()
    );
    let r = c.post_json("/v1/predict", &body).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = r.json();
    assert_eq!(v["answers"].as_array().map(Vec::len), Some(1024), "{v}");
    // a body over the limit (of a server taking one row per request, so that the body
    // stays small): 413, naming the limit and what to do
    let srv1 = serve_model(&m, &["--max-batch", "1"]);
    let mut c = Client::new(srv1.addr, None);
    let limit = c.get("/v1/model").unwrap().json()["max_body_bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(limit, 32 + 2 * 200 + 8 + 65_536);
    let pad = " ".repeat(limit as usize);
    let big = format!("{{\"inputs\": [[1, \"{a}\"]]{pad}}}");
    let r = c.post_json("/v1/predict", &big).unwrap();
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(r.body.contains("body_too_large"), "{}", r.body);
    assert!(
        r.body.contains(&format!("exceeds {limit} bytes")),
        "{}",
        r.body
    );
    assert!(r.body.contains("--max-body-bytes"), "{}", r.body);
}

/// A model of numbers keeps its OpenAPI rows of numbers and its 32-bytes-per-number limit.
#[test]
fn a_model_of_numbers_keeps_number_rows() {
    let d = tempfile::tempdir().unwrap();
    let ds = common::toy_dataset(d.path(), 300);
    let m = d.path().join("m.safetensors");
    ok(&[
        "train",
        "model-sensitivity",
        "--epsilon",
        "10",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--out",
        m.to_str().unwrap(),
    ]);
    let srv = serve_model(&m, &["--max-batch", "10"]);
    let mut c = Client::new(srv.addr, None);
    let doc = c.get("/openapi.json").unwrap().json();
    let items = &doc["components"]["schemas"]["PredictRequest"]["properties"]["inputs"]["items"];
    assert_eq!(items["items"]["type"], "number", "{items}");
    let info = c.get("/v1/model").unwrap().json();
    let d_in = info["input_dim"].as_u64().unwrap();
    assert_eq!(
        info["max_body_bytes"].as_u64(),
        Some(10 * d_in * 32 + 65_536)
    );
}
