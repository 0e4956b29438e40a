//! A build without the `cri` feature has no CRI client: the type exists so
//! that the engine's code reads the same, and no value of it can be made
//! ([`crate::config::Config::cri_client`] gives none).

use nodestatus_runtime::facts::RuntimeFacts;

use super::Error;

/// No client: this build was made without the `cri` feature.
#[derive(Debug)]
pub enum Client {}

impl Client {
    /// Never called: no client exists.
    pub fn present(&self) -> bool {
        match *self {}
    }

    /// Never called: no client exists.
    pub async fn facts(&self) -> Result<RuntimeFacts, Error> {
        match *self {}
    }

    /// Never called: no client exists.
    pub fn facts_blocking(&self) -> Result<RuntimeFacts, Error> {
        match *self {}
    }

    /// Never called: no client exists.
    pub fn socket(&self) -> &std::path::Path {
        match *self {}
    }
}
