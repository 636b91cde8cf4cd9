"""Who may call the API: a Cognito user pool, one app client, and the group ``admins``.

API Gateway verifies the pool's ID tokens (``CognitoUserPoolsAuthorizer``, see ``authorizer``);
the handlers read the caller from the claims and ``service.policy`` decides what they may do.
``make local`` creates this very pool, client and group in its local identity provider from the
synthesized template (``local.identity``), so local and deployed sign-in cannot drift.

Choices, and why:

* **No self-sign-up.** Every caller can claim scarce stock, seats and units; open sign-up would let
  anyone mint identities at will. Administrators create users (``AdminCreateUser``; README, Deploy).
* **Sign-in by username or email** (email as an alias), case-insensitive.
* **Passwords**: at least 12 characters with lower, upper, digit and symbol; a temporary password
  lasts 3 days.
* **MFA optional, TOTP only** (no SMS: no SNS role, no toll fraud). Required MFA (cdk-nag COG2)
  would make the contract's one-step flows (``ADMIN_USER_PASSWORD_AUTH`` / ``USER_PASSWORD_AUTH``,
  docs/identity.md) answer with an MFA challenge; any user can still enrol a TOTP app.
* **Threat protection** (cdk-nag COG8; COG3 for the older Advanced Security setting) needs
  the paid Plus feature plan, billed per active user: an account-level decision, off by default
  (``THREAT_PROTECTION = True`` enforces it).
* **The app client** is public (no secret: scripts and browsers cannot keep one) and allows
  exactly ``ADMIN_USER_PASSWORD_AUTH`` (scripts holding AWS credentials, the local ``make token``),
  ``USER_PASSWORD_AUTH`` (the contract's standard client flow), ``USER_SRP_AUTH`` (browser SDKs:
  the password never leaves the client) and refresh. No OAuth / hosted UI. ID tokens live 1 hour.
* The pool is **retained** with deletion protection, like the tables: identities are data (a
  development stack, ``turnstile:destroyWithStack``, deletes it with the stack: docs/teardown.md).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from constructs import Construct

from infra.nag import acknowledge
from infra.settings import Settings
from service.policy import ADMINS_GROUP

MIN_PASSWORD_LENGTH = 12
ID_TOKEN_VALIDITY = Duration.hours(1)
# How long API Gateway keeps an authorizer's answer per Authorization value (its default, said
# out loud: the local bridge keeps verified tokens exactly as long, local.bridge).
AUTHORIZER_CACHE_TTL = Duration.minutes(5)
THREAT_PROTECTION = False


class Auth(Construct):
    """The user pool (``user_pool``), its app client (``client``) and the ``admins`` group."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        settings = Settings.of(self)
        self.user_pool = cognito.UserPool(
            self,
            "UserPool",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(username=True, email=True),
            sign_in_case_sensitive=False,
            standard_attributes=cognito.StandardAttributes(
                email=cognito.StandardAttribute(required=False, mutable=True)
            ),
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            password_policy=cognito.PasswordPolicy(
                min_length=MIN_PASSWORD_LENGTH,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            mfa=cognito.Mfa.OPTIONAL,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            feature_plan=(
                cognito.FeaturePlan.PLUS if THREAT_PROTECTION else cognito.FeaturePlan.ESSENTIALS
            ),
            standard_threat_protection_mode=(
                cognito.StandardThreatProtectionMode.FULL_FUNCTION if THREAT_PROTECTION else None
            ),
            # Retained with deletion protection unless a development stack (infra.settings)
            deletion_protection=not settings.destroy_with_stack,
            removal_policy=settings.removal_policy,
        )
        self.client = self.user_pool.add_client(
            "AppClient",
            generate_secret=False,
            auth_flows=cognito.AuthFlow(
                admin_user_password=True, user_password=True, user_srp=True, custom=False
            ),
            disable_o_auth=True,
            prevent_user_existence_errors=True,
            enable_token_revocation=True,
            id_token_validity=ID_TOKEN_VALIDITY,
            access_token_validity=ID_TOKEN_VALIDITY,
            refresh_token_validity=Duration.days(30),
        )
        self.admins = cognito.CfnUserPoolGroup(
            self,
            "AdminsGroup",
            user_pool_id=self.user_pool.user_pool_id,
            group_name=ADMINS_GROUP,
            description="Administrators: change the catalogue, act on behalf of users",
        )
        acknowledge(
            self.user_pool,
            "COG2",
            "MFA is optional (TOTP), not required: the contract's one-step password flows "
            "(docs/identity.md) must return a token; self-sign-up is off and passwords are strong.",
        )
        if not THREAT_PROTECTION:
            for rule in ("COG8",):
                acknowledge(
                    self.user_pool,
                    rule,
                    "Threat protection needs Cognito's paid Plus plan, billed per active user: "
                    "an account-level choice, switched on by infra.auth.THREAT_PROTECTION.",
                )

    def authorizer(self, scope: Construct, construct_id: str) -> apigw.CognitoUserPoolsAuthorizer:
        """A REST API authorizer that accepts this pool's ID tokens in ``Authorization``."""
        return apigw.CognitoUserPoolsAuthorizer(
            scope,
            construct_id,
            cognito_user_pools=[self.user_pool],
            identity_source=apigw.IdentitySource.header("Authorization"),
            results_cache_ttl=AUTHORIZER_CACHE_TTL,
        )
