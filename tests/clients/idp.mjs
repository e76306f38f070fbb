// A real OpenID provider for the OAuth tests (tests/oauth.rs): panva's certified `oidc-provider`
// from npm, with dynamic client registration, PKCE and resource indicators (RFC 8707), issuing
// JWT access tokens whose audience is the resource the client asked for.
//
// The only test-specific part is the user: the login and consent pages are answered at once for
// the account named by `login_hint` (the test's user agent adds it to the authorization URL), so
// the flow runs without a browser. Accounts, with the claims put into their access tokens, come
// from IDP_ACCOUNTS as JSON: {"alice": {"org": "acme", "groups": ["admins"]}, ...}.
//
// Machine clients (the client-credentials grant, as an operator's CI pipeline signs in to the
// admin API) come from IDP_CLIENTS as JSON: {"ci": {"secret": "...", "claims": {"groups": [...]}}};
// their tokens are JWTs for the resource they ask for, carrying those claims (`sub` = client id).
// A client with "redirect_uris" is a web client instead (the authorization-code flow with
// refresh tokens, as Toolplane's control plane connects providers; tests/connections.rs).
//
// Usage: IDP_PORT=... IDP_ACCOUNTS='{...}' [IDP_CLIENTS='{...}'] [IDP_ROTATE_REFRESH_TOKENS=1]
//   [IDP_ACCESS_TOKEN_TTL=seconds] [IDP_LOG_TOKENS=1] node idp.mjs
//   (prints "ready <issuer>")

import crypto from 'node:crypto';
import http from 'node:http';
import Provider from 'oidc-provider';

const port = Number(process.env.IDP_PORT);
const issuer = `http://127.0.0.1:${port}`;
const accounts = JSON.parse(process.env.IDP_ACCOUNTS || '{}');
const machines = JSON.parse(process.env.IDP_CLIENTS || '{}');
const accessTokenTTL = Number(process.env.IDP_ACCESS_TOKEN_TTL || 600);

function signingKey(type, options, alg, kid) {
  const { privateKey } = crypto.generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: 'jwk' }), alg, use: 'sig', kid };
}

const provider = new Provider(issuer, {
  jwks: {
    keys: [
      // Key ids of this process's own: a restarted provider has new keys under new ids.
      signingKey('rsa', { modulusLength: 2048 }, 'RS256', `rsa-${process.pid}`),
      signingKey('ec', { namedCurve: 'P-256' }, 'ES256', `ec-${process.pid}`),
    ],
  },
  findAccount: (_ctx, id) =>
    accounts[id] ? { accountId: id, claims: () => ({ sub: id }) } : undefined,
  clients: Object.entries(machines).map(([id, machine]) =>
    machine.redirect_uris
      ? {
          // A web client (Toolplane's control plane connecting providers): the
          // authorization-code flow with refresh tokens.
          client_id: id,
          client_secret: machine.secret,
          grant_types: ['authorization_code', 'refresh_token'],
          redirect_uris: machine.redirect_uris,
          response_types: ['code'],
          token_endpoint_auth_method: machine.auth_method || 'client_secret_basic',
        }
      : {
          client_id: id,
          client_secret: machine.secret,
          grant_types: ['client_credentials'],
          redirect_uris: [],
          response_types: [],
          token_endpoint_auth_method: 'client_secret_post',
        },
  ),
  // Web clients get a refresh token whenever they may use one (without the OIDC rule that
  // ties offline_access to prompt=consent).
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  // IDP_ROTATE_REFRESH_TOKENS: every renewal spends its refresh token and issues a new one;
  // oidc-provider then answers a spent one with invalid_grant and revokes the grant.
  ...(process.env.IDP_ROTATE_REFRESH_TOKENS ? { rotateRefreshToken: () => true } : {}),
  extraTokenClaims: (_ctx, token) => {
    if (token.accountId === undefined && machines[token.clientId]) {
      return { ...machines[token.clientId].claims };
    }
    const account = accounts[token.accountId];
    return account ? { ...account } : {};
  },
  scopes: ['openid', 'offline_access', 'mcp'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resourceIndicator) => ({
        scope: 'mcp',
        audience: resourceIndicator,
        accessTokenTTL,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'ES256' } },
      }),
    },
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
});

// The user: logs in as login_hint and grants whatever the client asked for.
async function interact(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  let result;
  if (prompt.name === 'login') {
    const who = params.login_hint;
    result = accounts[who]
      ? { login: { accountId: who } }
      : { error: 'access_denied', error_description: `no account ${who}` };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
}

// With IDP_LOG_TOKENS set, every token answer is logged (tests/connections.rs greps Toolplane's
// stores and logs for exactly these tokens).
if (process.env.IDP_LOG_TOKENS) {
  provider.on('grant.success', (ctx) => console.log(`issued ${JSON.stringify(ctx.body)}`));
}

const callback = provider.callback();
http
  .createServer((req, res) => {
    if (req.url.startsWith('/interaction/')) {
      interact(req, res).catch((error) => {
        res.statusCode = 500;
        res.end(String(error));
      });
      return;
    }
    callback(req, res);
  })
  .listen(port, '127.0.0.1', () => console.log(`ready ${issuer}`));
