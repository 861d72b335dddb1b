/* auth.c — a connection's authentication state machine (auth.h). */
#include "net/auth.h"

#include <stdio.h>
#include <string.h>

void st_auth_init(st_auth_t *a, st_sec_protocol_t protocol)
{
    memset(a, 0, sizeof *a);
    a->state = ST_AUTH_HANDSHAKE;
    a->protocol = protocol;
}

int st_auth_transport_ready(st_auth_t *a)
{
    if (a->state != ST_AUTH_HANDSHAKE)
        return -1;
    if (st_sec_protocol_sasl(a->protocol)) {
        a->state = ST_AUTH_SASL_HANDSHAKE;
        return 0;
    }
    snprintf(a->principal, sizeof a->principal, "%s", ST_AUTH_ANONYMOUS);
    a->state = ST_AUTH_DONE;
    return 0;
}

int st_auth_sasl_mechanism(st_auth_t *a, const char *mechanism)
{
    if (a->state != ST_AUTH_SASL_HANDSHAKE || !mechanism || !*mechanism ||
        strlen(mechanism) >= sizeof a->mechanism)
        return -1;
    snprintf(a->mechanism, sizeof a->mechanism, "%s", mechanism);
    a->state = ST_AUTH_SASL_AUTHENTICATE;
    return 0;
}

int st_auth_reauth_begin(st_auth_t *a, const char *mechanism)
{
    if (a->state != ST_AUTH_DONE || a->reauth || !st_sec_protocol_sasl(a->protocol) || !mechanism)
        return -1;
    if (strcmp(mechanism, a->mechanism) != 0)
        return -2;
    a->reauth = true;
    return 0;
}

int st_auth_succeed(st_auth_t *a, const char *principal)
{
    if (!principal || !*principal || strlen(principal) >= sizeof a->principal)
        return -1;
    if (st_auth_reauthenticating(a)) {
        if (strcmp(principal, a->principal) != 0)
            return -2;
        a->reauth = false;
        a->reauthentications++;
        st_auth_fini(a);
        return 0;
    }
    if (a->state != ST_AUTH_SASL_AUTHENTICATE)
        return -1;
    snprintf(a->principal, sizeof a->principal, "%s", principal);
    a->state = ST_AUTH_DONE;
    st_auth_fini(a);
    return 0;
}

void st_auth_fail(st_auth_t *a)
{
    a->principal[0] = 0;
    a->reauth = false;
    a->state = ST_AUTH_FAILED;
    st_auth_fini(a);
}

void st_auth_fini(st_auth_t *a)
{
    if (a->sasl && a->sasl_free)
        a->sasl_free(a->sasl);
    a->sasl = NULL;
    a->sasl_free = NULL;
}

const char *st_auth_state_name(st_auth_state_t s)
{
    switch (s) {
    case ST_AUTH_HANDSHAKE:
        return "handshake";
    case ST_AUTH_SASL_HANDSHAKE:
        return "sasl-handshake";
    case ST_AUTH_SASL_AUTHENTICATE:
        return "sasl-authenticate";
    case ST_AUTH_DONE:
        return "authenticated";
    case ST_AUTH_FAILED:
        return "failed";
    }
    return "?";
}
