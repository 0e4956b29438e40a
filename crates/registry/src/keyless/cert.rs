//! The signing certificate: its chain to an authority, validity, SCTs and
//! key.

use sha2::{Digest as _, Sha256, Sha384};
use x509_cert::Certificate;
use x509_cert::der::asn1::ObjectIdentifier;
use x509_cert::der::{Decode as _, Encode as _};

use super::root::TrustedRoot;
use super::text::show_time;
use super::{Error, Key, Result};

/// The extended key usage extension.
pub(super) const OID_EKU: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
/// Extended key usage: code signing.
const OID_CODE_SIGNING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");
/// RFC 6962's embedded SCT list extension.
const OID_SCT_LIST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.2");
/// The signature algorithms of certificates read.
const OID_ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const OID_ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");

pub(super) fn extension<'a>(cert: &'a Certificate, oid: &ObjectIdentifier) -> Option<&'a [u8]> {
    cert.tbs_certificate
        .extensions
        .as_ref()?
        .iter()
        .find(|e| e.extn_id == *oid)
        .map(|e| e.extn_value.as_bytes())
}

pub(super) fn leaf_key(cert: &Certificate) -> Result<Key> {
    let spki = cert
        .tbs_certificate
        .subject_public_key_info
        .to_der()
        .map_err(|e| Error::Material(e.to_string()))?;
    match Key::from_spki(&spki, "") {
        Key::Unsupported(what) => Err(Error::Material(format!("its certificate holds {what}"))),
        key => Ok(key),
    }
}

pub(super) fn unix(t: x509_cert::time::Time) -> i64 {
    t.to_unix_duration().as_secs() as i64
}

fn check_valid(cert: &Certificate, which: &str, time: i64) -> Result<()> {
    let v = &cert.tbs_certificate.validity;
    let (from, to) = (unix(v.not_before), unix(v.not_after));
    if from <= time && time <= to {
        return Ok(());
    }
    Err(Error::Expired {
        which: which.to_owned(),
        time: show_time(time),
        not_before: show_time(from),
        not_after: show_time(to),
    })
}

/// Whether `issuer`'s key signed `cert`.
fn signed_by(cert: &Certificate, issuer: &Certificate) -> std::result::Result<(), String> {
    if cert.tbs_certificate.issuer != issuer.tbs_certificate.subject {
        return Err(format!(
            "issued by {}, not by {}",
            cert.tbs_certificate.issuer, issuer.tbs_certificate.subject
        ));
    }
    let key = leaf_key(issuer).map_err(|e| e.to_string())?;
    let tbs = cert.tbs_certificate.to_der().map_err(|e| e.to_string())?;
    let oid = cert.signature_algorithm.oid;
    let prehash = if oid == OID_ECDSA_SHA256 {
        Sha256::digest(&tbs).to_vec()
    } else if oid == OID_ECDSA_SHA384 {
        Sha384::digest(&tbs).to_vec()
    } else {
        return Err(format!(
            "its signature algorithm {oid} is not ECDSA with SHA-256 or SHA-384"
        ));
    };
    let signature = cert
        .signature
        .as_bytes()
        .ok_or_else(|| "its signature is not whole bytes".to_owned())?;
    match key.verifies_prehash(&prehash, signature) {
        true => Ok(()),
        false => Err(format!(
            "its signature does not verify with the key of {}",
            issuer.tbs_certificate.subject
        )),
    }
}

/// The leaf chains to an authority of `root` valid at `time`, every
/// certificate valid then; the leaf is for code signing.
pub(crate) fn check_chain(root: &TrustedRoot, leaf: &Certificate, time: i64) -> Result<()> {
    let eku = extension(leaf, &OID_EKU)
        .and_then(|b| x509_cert::ext::pkix::ExtendedKeyUsage::from_der(b).ok())
        .ok_or(Error::NotCodeSigning)?;
    if !eku.0.contains(&OID_CODE_SIGNING) {
        return Err(Error::NotCodeSigning);
    }
    let mut reasons = Vec::new();
    for authority in &root.authorities {
        let attempt = (|| {
            signed_by(leaf, &authority.chain[0])?;
            for pair in authority.chain.windows(2) {
                signed_by(&pair[0], &pair[1])?;
            }
            Ok::<(), String>(())
        })();
        match attempt {
            Ok(()) => {
                if !authority.valid.contains(time) {
                    return Err(Error::Chain {
                        root: root.path.clone(),
                        issuer: leaf.tbs_certificate.issuer.to_string(),
                        reason: format!(
                            "the authority {} is not valid at the entry's integrated time {}",
                            authority.uri,
                            show_time(time)
                        ),
                    });
                }
                check_valid(leaf, "(the signer's)", time)?;
                for c in &authority.chain {
                    check_valid(
                        c,
                        &format!("of the authority, {}", c.tbs_certificate.subject),
                        time,
                    )?;
                }
                return Ok(());
            }
            Err(why) => reasons.push(format!("{}: {why}", authority.uri)),
        }
    }
    Err(Error::Chain {
        root: root.path.clone(),
        issuer: leaf.tbs_certificate.issuer.to_string(),
        reason: reasons.join("; "),
    })
}

/// With `ctlogs` in the root: at least one embedded SCT verifies.
pub(super) fn check_scts(root: &TrustedRoot, leaf: &Certificate) -> Result<()> {
    if root.ctlogs.is_empty() {
        return Ok(());
    }
    let bad = |why: String| Error::Sct(why);
    let list = extension(leaf, &OID_SCT_LIST)
        .ok_or_else(|| bad("it has none, and the trusted root lists CT logs".into()))?;
    let list = x509_cert::ext::pkix::sct::SignedCertificateTimestampList::from_der(list)
        .map_err(|e| bad(format!("its SCT list is unreadable: {e}")))?;
    let scts = list
        .parse_timestamps()
        .map_err(|e| bad(format!("its SCT list is unreadable: {e:?}")))?;
    // The precertificate's TBS: the leaf's, without the SCT list.
    let mut tbs = leaf.tbs_certificate.clone();
    if let Some(exts) = tbs.extensions.as_mut() {
        exts.retain(|e| e.extn_id != OID_SCT_LIST);
    }
    let tbs = tbs.to_der().map_err(|e| bad(e.to_string()))?;
    let mut reasons = Vec::new();
    for sct in scts {
        let sct = match sct.parse_timestamp() {
            Ok(s) => s,
            Err(e) => {
                reasons.push(format!("an unreadable SCT ({e:?})"));
                continue;
            }
        };
        let Some(log) = root.ctlogs.iter().find(|l| l.key_id == sct.log_id.key_id) else {
            reasons.push(format!(
                "an SCT of the unknown CT log {}",
                hex::encode(sct.log_id.key_id)
            ));
            continue;
        };
        // The issuer's key hash: the authority that issued the leaf.
        let issuer_key_hash = root.authorities.iter().find_map(|a| {
            let issuer = &a.chain[0];
            (signed_by(leaf, issuer).is_ok())
                .then(|| issuer.tbs_certificate.subject_public_key_info.to_der().ok())
                .flatten()
                .map(Sha256::digest)
        });
        let Some(issuer_key_hash) = issuer_key_hash else {
            reasons.push("its issuer is not in the trusted root".into());
            continue;
        };
        let mut signed = vec![0u8, 0u8]; // v1, certificate_timestamp
        signed.extend_from_slice(&sct.timestamp.to_be_bytes());
        signed.extend_from_slice(&[0, 1]); // precert_entry
        signed.extend_from_slice(&issuer_key_hash);
        let len = tbs.len() as u32;
        signed.extend_from_slice(&len.to_be_bytes()[1..]);
        signed.extend_from_slice(&tbs);
        let ext = sct.extensions.as_slice();
        signed.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        signed.extend_from_slice(ext);
        if log.valid.contains((sct.timestamp / 1000) as i64)
            && log
                .key
                .verifies(&signed, sct.signature.signature.as_slice())
        {
            return Ok(());
        }
        reasons.push(format!("the SCT of {} does not verify", log.base_url));
    }
    Err(bad(reasons.join("; ")))
}
