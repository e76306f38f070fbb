//! Tenants' token issuers against the rest of the state: the roles they map to, the issuers
//! other tenants trust, and which tenant and role an access token stands for.

use serde_json::Value;

use super::State;
use crate::error::Violations;
use crate::model::Tenant;
use crate::tokens::{TokenIssuer, TokenRefusal};

impl State {
    /// Checks of a tenant's token issuers against the rest of the state: every mapped role
    /// exists and the tenant allows it, and no other tenant trusts the same issuer in a way
    /// that could accept the same token.
    pub(crate) fn check_token_issuers(&self, tenant: &Tenant, v: &mut Violations) {
        for (i, trust) in tenant.token_issuers.iter().enumerate() {
            for role in trust.roles() {
                if !self.roles.contains_key(role) {
                    v.add(
                        format!("tenant.token_issuers[{i}]"),
                        format!("unknown role {role:?}: register it first"),
                    );
                } else if !tenant.allows_role(role) {
                    v.add(
                        format!("tenant.token_issuers[{i}]"),
                        format!("role {role:?} is not among the tenant's roles"),
                    );
                }
            }
            for other in self.tenants.values().filter(|t| t.id != tenant.id) {
                // An issuer's keys are the issuer's: configured once, the same for every
                // tenant that trusts it. Otherwise one tenant could name keys it controls and
                // mint tokens that another tenant's trust maps (the claims pick the tenant).
                if let Some(o) = other
                    .token_issuers
                    .iter()
                    .find(|o| o.issuer == trust.issuer && o.jwks_uri != trust.jwks_uri)
                {
                    v.add(
                        format!("tenant.token_issuers[{i}].jwks_uri"),
                        format!(
                            "tenant {:?} trusts {:?} with {}; an issuer's keys are configured once, the same for every tenant",
                            other.id,
                            trust.issuer,
                            o.jwks_uri.as_deref().map_or_else(
                                || "keys discovered from its metadata".to_owned(),
                                |uri| format!("jwks_uri {uri:?}")
                            )
                        ),
                    );
                }
                let clash = other
                    .token_issuers
                    .iter()
                    .filter(|o| o.issuer == trust.issuer)
                    .any(|o| match (&trust.tenant_claim, &o.tenant_claim) {
                        (Some(a), Some(b)) => a != b || trust.tenant_value == o.tenant_value,
                        _ => true,
                    });
                if clash {
                    v.add(
                        format!("tenant.token_issuers[{i}]"),
                        format!(
                            "tenant {:?} trusts {:?} too: both need tenant_claim (same claim, different values)",
                            other.id, trust.issuer
                        ),
                    );
                }
            }
        }
    }

    /// The one trust (and its tenant) that a token from `issuer` with `claims` belongs to:
    /// the trust whose tenant claim the claims hold. The claims need not be verified yet —
    /// this picks the one key set and audience to verify the token with; the verified claims
    /// must then select the same trust ([`State::map_token`]).
    pub fn select_trust(
        &self,
        issuer: &str,
        claims: &Value,
    ) -> Result<(&Tenant, &TokenIssuer), TokenRefusal> {
        let mut matches = self.tenants.values().filter_map(|tenant| {
            tenant
                .token_issuers
                .iter()
                .find(|trust| trust.issuer == issuer && trust.selects(claims))
                .map(|trust| (tenant, trust))
        });
        let Some(found) = matches.next() else {
            return Err(TokenRefusal::UnknownIssuer);
        };
        let others: Vec<String> = matches.map(|(t, _)| t.id.clone()).collect();
        if !others.is_empty() {
            let mut all = vec![found.0.id.clone()];
            all.extend(others);
            return Err(TokenRefusal::Ambiguous(all));
        }
        Ok(found)
    }

    /// The (tenant, role) a token from `issuer` with verified `claims` belongs to.
    pub fn map_token(
        &self,
        issuer: &str,
        claims: &Value,
    ) -> Result<(&Tenant, String), TokenRefusal> {
        let (tenant, trust) = self.select_trust(issuer, claims)?;
        let role = trust.role(claims).ok_or(TokenRefusal::NoRole)?;
        if !tenant.allows_role(role) || !self.roles.contains_key(role) {
            return Err(TokenRefusal::RoleNotAllowed(role.to_owned()));
        }
        Ok((tenant, role.to_owned()))
    }
}
