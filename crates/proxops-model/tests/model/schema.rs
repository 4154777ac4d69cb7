//! scratch
fn deep(levels: usize, per: usize) -> String {
    let mut s = format!("a0: &a0 {}x{}\n", "[".repeat(per), "]".repeat(per));
    for i in 1..levels {
        s.push_str(&format!(
            "a{i}: &a{i} {}*a{}{}\n",
            "[".repeat(per),
            i - 1,
            "]".repeat(per)
        ));
    }
    s
}
#[test]
fn amplified() {
    for (levels, per) in [(4, 250)] {
        let s = deep(levels, per);
        let r = proxops_model::yaml::parse_documents(&s);
        eprintln!(
            "{levels}x{per}: {:?}",
            r.as_ref().map(|d| d.len()).map_err(|e| e.message.clone())
        );
    }
}
