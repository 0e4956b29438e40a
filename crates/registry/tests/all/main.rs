//! The registry crate against a real registry: Debian's `docker-registry`
//! (distribution 2.8) on loopback, with TLS from a CA made by the tests and
//! htpasswd authentication (see `support`). One binary, one link step.

mod failures;
mod pull;
mod sign;
mod support;
