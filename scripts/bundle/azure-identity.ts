/**
 * Stands in for `@azure/identity` in the Lambda bundles (scripts/bundle/aliases.ts), for tedious only. tedious
 * requires the package at the top of `lib/connection.js` but constructs a credential only when a connection asks
 * for Azure AD (Entra ID) authentication: these four classes, each when the server answers the login with a
 * federated-authentication request. QueueBox connects with SQL authentication (user and password in
 * `database.url`); the real package and `@azure/msal-node` below it put ≈ 0.5 MB into every bundle for a path that
 * is never taken. The price: an ADO.NET `database.url` with `Authentication=Active Directory …` (which mssql's
 * parser accepts) fails on Lambda with {@link AzureAdUnavailableError} instead of signing in. An access token
 * (`Authentication=Active Directory Integrated;Token=…`) needs no credential class and still works.
 */
import { QueueBoxError } from '@queuebox/core';

/** A connection asked for Azure AD authentication, which QueueBox's functions do not carry. */
export class AzureAdUnavailableError extends QueueBoxError {
  constructor(credential: string) {
    super(
      `Azure AD authentication is not available in QueueBox's functions (the connection asked for ${credential}); use SQL authentication in database.url: sqlserver://user:password@host:1433/database`,
      { context: { credential } },
    );
  }
}

function unavailable(credential: string): never {
  throw new AzureAdUnavailableError(credential);
}

/** tedious `azure-active-directory-password`. Always throws {@link AzureAdUnavailableError}. */
export class UsernamePasswordCredential {
  constructor(..._options: unknown[]) {
    unavailable('UsernamePasswordCredential (azure-active-directory-password)');
  }
}

/** tedious `azure-active-directory-msi-vm` and `-msi-app-service`. Always throws {@link AzureAdUnavailableError}. */
export class ManagedIdentityCredential {
  constructor(..._options: unknown[]) {
    unavailable('ManagedIdentityCredential (azure-active-directory-msi-vm / -msi-app-service)');
  }
}

/** tedious `azure-active-directory-default`. Always throws {@link AzureAdUnavailableError}. */
export class DefaultAzureCredential {
  constructor(..._options: unknown[]) {
    unavailable('DefaultAzureCredential (azure-active-directory-default)');
  }
}

/** tedious `azure-active-directory-service-principal-secret`. Always throws {@link AzureAdUnavailableError}. */
export class ClientSecretCredential {
  constructor(..._options: unknown[]) {
    unavailable('ClientSecretCredential (azure-active-directory-service-principal-secret)');
  }
}
