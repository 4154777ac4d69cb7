//! Canonical YAML: any value in JSON's model reads back as itself, and writing is stable.

use proptest::prelude::*;
use proxops_store::canonical::{parse_yaml, to_yaml};
use serde_json::Value;

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u32>().prop_map(|n| Value::from(f64::from(n) / 8.0)),
        "\\PC{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "true",
            "no",
            "~",
            "null",
            "0x1f",
            "1e5",
            "-",
            "- a",
            "a: b",
            "#",
            "",
            " ",
            "on",
            "12:30:00",
            "2026-01-01",
            "é\u{2028}x",
            "\t",
            "\\",
            "\"",
            "'",
            "a\nb",
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,8}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_value_reads_back_as_itself(v in value()) {
        let text = to_yaml(&v);
        let back = parse_yaml(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&back, &v, "{}", text);
        prop_assert_eq!(to_yaml(&back), text);
    }
}
