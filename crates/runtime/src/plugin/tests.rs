//! The plugin module's unit tests.

use super::*;

#[test]
fn header_checks_name_the_problem() {
    assert!(matches!(
        check_header(b"hello world"),
        Err(LoadError::NotWasm)
    ));
    assert!(matches!(
        check_header(b"\0asm\x01\0\0\0"),
        Err(LoadError::CoreModule)
    ));
    assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
}

#[test]
fn names_are_dns_labels() {
    assert!(valid_name("gpu-reporter"));
    assert!(!valid_name("GPU"));
    assert!(!valid_name("-x"));
    assert!(!valid_name(""));
    assert!(!valid_name(&"a".repeat(64)));
}

#[test]
fn each_metadata_rule_has_its_variant() {
    use PluginInfo;
    let info = |name: &str, version: &str, paths: &[&str], env: &[&str]| PluginInfo {
        name: name.into(),
        version: version.into(),
        description: String::new(),
        paths: paths.iter().map(|s| s.to_string()).collect(),
        env: env.iter().map(|s| s.to_string()).collect(),
        affects_readiness: false,
    };
    let error = |i| match validate_metadata(i) {
        Err(LoadError::BadMetadata(e)) => e,
        other => panic!("not bad metadata: {other:?}"),
    };
    assert!(validate_metadata(info("ok", "1", &["/proc"], &["HOME"])).is_ok());
    assert_eq!(
        error(info("No", "1", &[], &[])),
        MetadataError::Name("No".into())
    );
    assert_eq!(
        error(info("ok", &"1".repeat(65), &[], &[])),
        MetadataError::TooLong
    );
    assert_eq!(
        error(info("ok", "1", &["/proc/../etc"], &[])),
        MetadataError::Path("/proc/../etc".into())
    );
    assert_eq!(
        error(info("ok", "1", &[], &["1X"])),
        MetadataError::Env("1X".into())
    );
}

fn meta(paths: &[&str], env: &[&str]) -> Metadata {
    Metadata {
        name: "p".into(),
        version: "1".into(),
        description: String::new(),
        paths: paths.iter().map(|s| s.to_string()).collect(),
        env: env.iter().map(|s| s.to_string()).collect(),
        affects_readiness: false,
    }
}

#[test]
fn grants_are_the_intersection() {
    let s = PluginSettings {
        paths: vec![PathGrant::same("/proc")],
        env: vec!["HOME".into()],
        ..Default::default()
    };
    let (g, withheld) =
        resolve_grants(&meta(&["/proc/sys", "/etc"], &["HOME", "SECRET"]), &s).unwrap();
    assert_eq!(g.paths, vec![PathGrant::same("/proc/sys")]);
    assert_eq!(
        g.env.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        vec!["HOME"]
    );
    assert_eq!(
        withheld,
        vec![
            Withheld::Path("/etc".into()),
            Withheld::Env("SECRET".into())
        ]
    );

    let refuse = PluginSettings {
        on_ungranted: Ungranted::Refuse,
        ..s
    };
    let err = resolve_grants(&meta(&["/etc"], &[]), &refuse).unwrap_err();
    assert!(
        matches!(&err, LoadError::Ungranted { withheld, .. } if *withheld == [Withheld::Path("/etc".into())]),
        "{err}"
    );
}
