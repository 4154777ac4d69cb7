//! scratch
#[test]
fn dump() {
    for (name, text) in proxops_model::schema::schema_files(&proxops_model::Registry::builtin()) {
        std::fs::write(format!("/tmp/schemadump-{name}"), text).unwrap();
    }
}
