//! Kubernetes names, as apimachinery's `util/validation` checks them.

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| is_alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsDNS1123Subdomain`: at most 253 characters of
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// `IsQualifiedName`: an optional DNS-subdomain prefix (253 characters at
/// most) and `/`, then 1 to 63 characters of `[A-Za-z0-9_.-]`, starting and
/// ending with a letter or digit.
pub fn qualified_name(key: &str) -> Result<(), String> {
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => name,
        [prefix, name] => {
            if !is_dns1123_subdomain(prefix) {
                return Err(format!(
                    "{key:?}: the prefix must be a lowercase DNS subdomain of at most 253 characters"
                ));
            }
            name
        }
        _ => {
            return Err(format!(
                "{key:?}: at most one '/' may separate a prefix from the name"
            ));
        }
    };
    if name.len() > 63 || !qualified_name_part(name) {
        return Err(format!(
            "{key:?}: the name part must be 1 to 63 characters of [A-Za-z0-9_.-], starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// `IsValidLabelValue`: empty, or up to 63 characters like a qualified
/// name's name part.
pub fn label_value(v: &str) -> Result<(), String> {
    if v.is_empty() || (v.len() <= 63 && qualified_name_part(v)) {
        Ok(())
    } else {
        Err(format!(
            "invalid label value {v:?}: at most 63 characters of [A-Za-z0-9_.-], starting and ending with a letter or digit"
        ))
    }
}

/// `IsDNS1123Subdomain`, with a message that says what is accepted (node
/// names, hostnames).
pub fn dns1123_subdomain(s: &str) -> Result<(), String> {
    if !s.is_empty() && is_dns1123_subdomain(s) {
        Ok(())
    } else {
        Err(format!(
            "{s:?} must be a lowercase RFC 1123 DNS subdomain: letters, digits, '-' and '.', at most 253 characters"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_apimachinery() {
        assert!(qualified_name("example.com/a_b.c-d").is_ok());
        assert!(qualified_name(&format!("{}/a", "a".repeat(253))).is_ok());
        assert!(qualified_name(&format!("{}.com/a", "a".repeat(70))).is_ok());
        assert!(qualified_name(&format!("{}/a", "a".repeat(254))).is_err());
        assert!(qualified_name(&"a".repeat(63)).is_ok());
        assert!(qualified_name(&"a".repeat(64)).is_err());
        for k in [
            "",
            "/a",
            "a/",
            "a/b/c",
            "-a",
            "a-",
            "Example.com/a",
            "a b",
            "é",
        ] {
            assert!(qualified_name(k).is_err(), "{k}");
        }
        assert!(label_value("").is_ok());
        assert!(label_value(&"v".repeat(63)).is_ok());
        assert!(label_value(&"v".repeat(64)).is_err());
        assert!(label_value("has space").is_err());
    }

    #[test]
    fn dns_subdomains() {
        assert!(dns1123_subdomain("node-1.example.com").is_ok());
        for bad in ["", "Node", "-a", "a-", "a..b", "a_b"] {
            assert!(dns1123_subdomain(bad).is_err(), "{bad}");
        }
        // Go's check bounds the whole name, not each label.
        assert!(dns1123_subdomain(&"a".repeat(253)).is_ok());
        assert!(dns1123_subdomain(&"a".repeat(254)).is_err());
        let ok = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert_eq!(ok.len(), 253);
        assert!(dns1123_subdomain(&ok).is_ok());
    }
}
