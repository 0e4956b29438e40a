//! What the API server's rules measure: a value's size as JSON, and which
//! resource names take integer quantities.

use nodestatus_apimachinery::names::qualified_name;
use serde_json::Value;

/// The size of `v` as compact JSON, without building the text.
pub fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    serde_json::to_writer(&mut c, v).expect("a Value serializes");
    c.0
}

/// `helper.IsIntegerResourceName`: `pods` (and the quota counts), and every
/// extended resource: a name with a domain outside `kubernetes.io` that is
/// not under `requests.` and makes a qualified name as `requests.<name>`.
pub fn is_integer_resource(name: &str) -> bool {
    const INTEGER: &[&str] = &[
        "pods",
        "count/quotas",
        "quotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    ];
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    INTEGER.contains(&name)
        || (!native
            && !name.starts_with("requests.")
            && qualified_name(&format!("requests.{name}")).is_ok())
}
