//! The SDK against the vectors that k8s.io/apimachinery computed (guests/vectors).

use std::collections::BTreeMap;

use kubewasm_guest::conditions::{
    Condition, find_condition, is_condition_false, is_condition_present_and_equal,
    is_condition_true, remove_condition, set_status_condition,
};
use kubewasm_guest::selector::LabelSelector;
use serde_json::{Value, json};

fn vectors(name: &str) -> Vec<Value> {
    let path = format!("{}/../vectors/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut file: Value = serde_json::from_str(&text).unwrap();
    serde_json::from_value(file["vectors"].take()).unwrap()
}

/// `value` without the given keys: a vector's answers without its inputs.
fn without(value: &Value, keys: &[&str]) -> Value {
    let mut object = value.as_object().unwrap().clone();
    object.retain(|key, _| !keys.contains(&key.as_str()));
    Value::Object(object)
}

/// Fails listing the first disagreements, if any.
fn agree(disagreements: &[String]) {
    assert!(
        disagreements.is_empty(),
        "{} disagreements:\n{}",
        disagreements.len(),
        disagreements[..disagreements.len().min(5)].join("\n")
    );
}

/// The SDK's answers in the shape of a vector's.
fn selector_answers(selector: &LabelSelector, cases: &[Value]) -> Value {
    let rejected = [
        selector.to_query().is_err(),
        selector.matches(&BTreeMap::new()).is_err(),
    ];
    if rejected.contains(&true) {
        return json!({"error": if rejected == [true, true] { json!(true) } else { json!(rejected) }});
    }
    let matches: Vec<Value> = cases
        .iter()
        .map(|case| {
            let labels: BTreeMap<String, String> =
                serde_json::from_value(case["labels"].clone()).unwrap();
            json!({"labels": labels, "match": selector.matches(&labels).unwrap()})
        })
        .collect();
    json!({
        "error": false,
        "empty": selector.is_empty(),
        "query": selector.to_query().unwrap(),
        "matches": matches,
    })
}

#[test]
fn label_selectors_agree_with_apimachinery() {
    let mut disagreements = Vec::new();
    for vector in vectors("selectors") {
        // A LabelSelector is never nil: an Option<LabelSelector> tells an absent selector
        // (which matches nothing) from an empty one.
        if vector["selector"].is_null() {
            continue;
        }
        let selector: LabelSelector = serde_json::from_value(vector["selector"].clone()).unwrap();
        let want = without(&vector, &["name", "selector"]);
        let cases = want["matches"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let got = selector_answers(&selector, cases);
        if got != want {
            let differing: Vec<String> = ["error", "empty", "query", "matches"]
                .into_iter()
                .filter(|key| got[key] != want[key])
                .map(|key| format!("{key} {} for {}", got[key], want[key]))
                .collect();
            let (name, given) = (&vector["name"], &vector["selector"]);
            disagreements.push(format!("{name} {given}: {}", differing.join("; ")));
        }
    }
    agree(&disagreements);
}

/// Performs one step on `conditions` and returns the answers in the shape of the vector's.
fn perform(conditions: &mut Vec<Condition>, step: &Value) -> Value {
    let type_ = step["type"].as_str().unwrap_or_default();
    match step["op"].as_str().unwrap() {
        "set" => {
            let condition = serde_json::from_value(step["condition"].clone()).unwrap();
            let changed = set_status_condition(conditions, condition);
            json!({"changed": changed, "conditions": conditions})
        }
        "remove" => {
            let removed = remove_condition(conditions, type_);
            json!({"removed": removed, "conditions": conditions})
        }
        "find" => json!({"found": find_condition(conditions, type_)}),
        "isTrue" => json!({"result": is_condition_true(conditions, type_)}),
        "isFalse" => json!({"result": is_condition_false(conditions, type_)}),
        "isPresentAndEqual" => {
            let status = serde_json::from_value(step["status"].clone()).unwrap();
            json!({"result": is_condition_present_and_equal(conditions, type_, status)})
        }
        op => panic!("unknown step {op}"),
    }
}

#[test]
fn status_conditions_agree_with_apimachinery() {
    let mut disagreements = Vec::new();
    for vector in vectors("conditions") {
        let mut conditions: Vec<Condition> =
            serde_json::from_value(vector["conditions"].clone()).unwrap();
        for (index, step) in vector["steps"].as_array().unwrap().iter().enumerate() {
            let got = perform(&mut conditions, step);
            let want = without(step, &["op", "type", "condition", "status"]);
            if got != want {
                disagreements.push(format!("{} step {index}: {step}: {got}", vector["name"]));
                break;
            }
        }
    }
    agree(&disagreements);
}
