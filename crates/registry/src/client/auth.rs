//! A session's credentials: the auth file's or a helper's, the bearer
//! token of each operation, and the errors that name where they came
//! from.

use oci_client::RegistryOperation;
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;

use super::error::{Error, Result};
use super::session::Session;
use crate::credentials::{self, Challenge, Found};
use crate::settings::Auth;

impl Session {
    /// The credentials: the auth file's, or its helper's answer (asked
    /// once).
    pub(super) async fn found(&self) -> Result<&Found> {
        self.found
            .get_or_try_init(|| async {
                match &self.auth {
                    None => Ok(Found::Anonymous),
                    Some(Auth::Basic(c)) => Ok(Found::Basic(c.clone())),
                    Some(Auth::IdentityToken(t)) => Ok(Found::IdentityToken(t.clone())),
                    Some(Auth::Helper {
                        helper,
                        field,
                        path,
                    }) => credentials::helper_get(
                        helper,
                        field,
                        path,
                        self.reference.registry(),
                        credentials::HELPER_TIMEOUT.min(self.timeout / 2),
                    )
                    .await
                    .map_err(|e| self.credentials_error(e)),
                }
            })
            .await
    }

    /// Where the credentials came from, in words, for the errors.
    fn origin(&self) -> String {
        match (self.found.get(), &self.auth) {
            (Some(Found::Anonymous), Some(Auth::Helper { helper, .. })) => format!(
                "no credentials (docker-credential-{helper} has none for {})",
                self.reference.registry()
            ),
            _ => self.origin.clone(),
        }
    }

    fn credentials_error(&self, source: credentials::Error) -> Error {
        Error::Credentials {
            reference: self.reference.clone(),
            registry: self.reference.registry().to_owned(),
            source: Box::new(source),
        }
    }

    /// The bearer token for `op` (`repository:<name>:pull`, or `pull,push`)
    /// on this session's repository, asked once, and oci-client made
    /// ready for `op`'s requests: oci-client's own flow with Basic
    /// credentials or none (`None` for a registry that takes Basic
    /// credentials or none), or an identity token exchanged at the token
    /// server.
    pub(super) async fn authorize(&self, op: RegistryOperation) -> Result<Option<String>> {
        let slot = usize::from(op == RegistryOperation::Push);
        let mut tokens = self.tokens.lock().await;
        if let Some(t) = &tokens[slot] {
            return Ok(t.clone());
        }
        let auth = match self.found().await? {
            Found::Anonymous => RegistryAuth::Anonymous,
            Found::Basic(c) => {
                RegistryAuth::Basic(c.username.clone(), c.password.expose().to_owned())
            }
            Found::IdentityToken(refresh) => {
                let challenge = self.challenge().await?;
                let scope = format!(
                    "repository:{}:{}",
                    self.reference.oci().repository(),
                    match op {
                        RegistryOperation::Pull => "pull",
                        RegistryOperation::Push => "pull,push",
                    }
                );
                let access = credentials::exchange(
                    &self.http,
                    self.reference.registry(),
                    &challenge,
                    refresh,
                    &scope,
                    &self.origin(),
                )
                .await
                .map_err(|e| self.credentials_error(e))?;
                RegistryAuth::Bearer(access.expose().to_owned())
            }
        };
        let got = self
            .oci
            .auth(self.reference.oci(), &auth, op)
            .await
            .map_err(|e| match e {
                OciDistributionError::AuthenticationFailure(_) => Error::CredentialsRefused {
                    reference: self.reference.clone(),
                    registry: self.reference.registry().to_owned(),
                    origin: self.origin(),
                    source: e,
                },
                e => self.error(e),
            })?;
        tokens[slot] = Some(got.clone());
        Ok(got)
    }

    /// The registry's `Bearer` challenge to an anonymous `GET /v2/`: where
    /// its token server is.
    async fn challenge(&self) -> Result<Challenge> {
        let url = format!(
            "{}://{}/v2/",
            self.scheme,
            self.reference.oci().resolve_registry()
        );
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| self.error(OciDistributionError::RequestError(e)))?;
        response
            .headers()
            .get(http::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(Challenge::parse)
            .ok_or_else(|| {
                self.credentials_error(credentials::Error::NoTokenServer {
                    registry: self.reference.registry().to_owned(),
                    status: response.status().as_u16(),
                    origin: self.origin(),
                })
            })
    }

    /// `e`, or [`Error::NoAccess`] when it is a 401 or 403 to a request
    /// that carried a bearer token for `op`: the token server accepted the
    /// credentials but did not grant the repository. `challenge` is the
    /// registry's `WWW-Authenticate`, when there is one.
    pub(super) async fn no_access(
        &self,
        e: Error,
        op: RegistryOperation,
        challenge: Option<Challenge>,
    ) -> Error {
        let granted = matches!(
            self.tokens.lock().await[usize::from(op == RegistryOperation::Push)],
            Some(Some(_))
        );
        match e {
            Error::Unauthorized { .. } if granted => Error::NoAccess {
                reference: self.reference.clone(),
                registry: self.reference.registry().to_owned(),
                origin: self.origin(),
                action: match op {
                    RegistryOperation::Pull => "pull",
                    RegistryOperation::Push => "push",
                },
                repository: self.reference.oci().repository().to_owned(),
                scope: match challenge {
                    Some(Challenge {
                        error: Some(error),
                        scope,
                        ..
                    }) => format!(", {error} for {}", scope.unwrap_or_default()),
                    _ => String::new(),
                },
            },
            e => e,
        }
    }
}
