/* secure.c — the inter-broker listener's security for this broker's own connections
 * (secure.h). */
#include "replica/secure.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/log.h"
#include "net/tls.h"

int st_rsec_create(const st_config_t *cfg, st_rsec_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg || cfg->nkafka_listeners == 0)
        return 0;
    const st_listener_t *ib = &cfg->kafka_listeners[cfg->inter_broker_listener];
    bool tls = st_sec_protocol_tls(ib->protocol), sasl = st_sec_protocol_sasl(ib->protocol);
    if (!tls && !sasl)
        return 0;
    st_rsec_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    char lname[ST_LISTENER_NAME_MAX];
    size_t i = 0;
    for (; ib->name[i] && i + 1 < sizeof lname; i++)
        lname[i] = (char)tolower((unsigned char)ib->name[i]);
    lname[i] = 0;
    int rc = 0;
    if (tls) {
        st_config_lookup_t lk = {.cfg = cfg, .listener = lname};
        st_tls_settings_t t = {0};
        st_tls_settings_get(&t, st_config_lookup, &lk);
        const char *alg =
            st_config_listener_get(cfg, lname, "ssl.endpoint.identification.algorithm");
        char e[512];
        if (st_tls_client_create(&t, "inter-broker client", &s->tls, e, sizeof e)) {
            snprintf(err, errlen, "inter-broker client (listener %s): %s", ib->name, e);
            rc = ST_E_CONFIG;
        } else if (strcasecmp(alg, "https") == 0) {
            s->verify_host = true;
        } else if (*alg) {
            snprintf(err, errlen,
                     "ssl.endpoint.identification.algorithm=%s: expected https or empty", alg);
            rc = ST_E_CONFIG;
        }
    }
    if (!rc && sasl) {
        const char *m = cfg->sasl_mechanism_inter_broker_protocol;
        snprintf(s->mechanism, sizeof s->mechanism, "%s", m);
        for (i = 0; s->mechanism[i]; i++)
            s->mechanism[i] = (char)toupper((unsigned char)s->mechanism[i]);
        s->scram = st_scram_mech_parse(s->mechanism);
        s->sasl = s->scram != ST_SCRAM_UNKNOWN         ? ST_RSEC_SASL_SCRAM
                  : strcmp(s->mechanism, "PLAIN") == 0 ? ST_RSEC_SASL_PLAIN
                                                       : ST_RSEC_SASL_NONE;
        if (s->sasl == ST_RSEC_SASL_NONE) {
            snprintf(err, errlen, "sasl.mechanism.inter.broker.protocol: '%s' is not supported", m);
            rc = ST_E_CONFIG;
        } else {
            rc = st_config_inter_broker_credentials(cfg, s->user, sizeof s->user, s->password,
                                                    sizeof s->password, err, errlen);
        }
    }
    if (rc) {
        st_rsec_destroy(s);
        return rc;
    }
    ST_INFO("inter-broker client: %s to listener %s%s%s%s%s%s", st_sec_protocol_name(ib->protocol),
            ib->name, tls && !s->verify_host ? " (no host name check)" : "", sasl ? ", SASL " : "",
            sasl ? s->mechanism : "", sasl ? " as " : "", sasl ? s->user : "");
    *out = s;
    return 0;
}

void st_rsec_destroy(st_rsec_t *s)
{
    if (!s)
        return;
    st_tls_server_destroy(s->tls);
    OPENSSL_cleanse(s->password, sizeof s->password);
    free(s);
}
