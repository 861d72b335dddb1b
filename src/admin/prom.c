/* prom.c — Prometheus text exposition writer (format in prom.h). */
#include "admin/prom.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(st_buf_t *b, const char *s)
{
    st_buf_append(b, s, strlen(s));
}

void st_prom_init(st_prom_t *p, st_buf_t *out)
{
    p->out = out;
    p->family = NULL;
}

void st_prom_escape_label(st_buf_t *out, const char *v)
{
    const char *run = v;
    for (; *v; v++) {
        const char *esc = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
        if (!esc)
            continue;
        st_buf_append(out, run, (size_t)(v - run));
        put(out, esc);
        run = v + 1;
    }
    st_buf_append(out, run, (size_t)(v - run));
}

static void escape_help(st_buf_t *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            put(out, "\\\\");
        else if (*v == '\n')
            put(out, "\\n");
        else
            st_buf_append(out, v, 1);
    }
}

static void fmt_number(char *buf, size_t n, double v)
{
    if (isnan(v))
        snprintf(buf, n, "NaN");
    else if (isinf(v))
        snprintf(buf, n, "%s", v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 9007199254740992.0) /* exact integers as integers */
        snprintf(buf, n, "%" PRId64, (int64_t)v);
    else {
        /* The shortest of 15..17 significant digits that reads back as v: 0.1, not
         * 0.10000000000000001. */
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, n, "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    }
}

void st_prom_number(st_buf_t *out, double v)
{
    char tmp[64];
    fmt_number(tmp, sizeof tmp, v);
    put(out, tmp);
}

void st_prom_family(st_prom_t *p, const char *name, const char *type, const char *help)
{
    p->family = name;
    put(p->out, "# HELP ");
    put(p->out, name);
    put(p->out, " ");
    escape_help(p->out, help);
    put(p->out, "\n# TYPE ");
    put(p->out, name);
    put(p->out, " ");
    put(p->out, type);
    put(p->out, "\n");
}

static void series(st_prom_t *p, const char *suffix, const st_prom_label_t *labels, int nlabels)
{
    put(p->out, p->family);
    put(p->out, suffix);
    if (nlabels > 0) {
        put(p->out, "{");
        for (int i = 0; i < nlabels; i++) {
            if (i)
                put(p->out, ",");
            put(p->out, labels[i].name);
            put(p->out, "=\"");
            st_prom_escape_label(p->out, labels[i].value);
            put(p->out, "\"");
        }
        put(p->out, "}");
    }
    put(p->out, " ");
}

void st_prom_sample(st_prom_t *p, const char *suffix, const st_prom_label_t *labels, int nlabels,
                    double value)
{
    series(p, suffix, labels, nlabels);
    st_prom_number(p->out, value);
    put(p->out, "\n");
}

void st_prom_sample_u64(st_prom_t *p, const char *suffix, const st_prom_label_t *labels,
                        int nlabels, uint64_t value)
{
    char tmp[32];
    series(p, suffix, labels, nlabels);
    snprintf(tmp, sizeof tmp, "%" PRIu64 "\n", value);
    put(p->out, tmp);
}

void st_prom_histogram(st_prom_t *p, const st_prom_label_t *labels, int nlabels,
                       const double *bounds, const uint64_t *counts, int nb, double sum)
{
    st_prom_label_t l[7];
    if (nlabels > 6)
        nlabels = 6;
    if (nlabels > 0)
        memcpy(l, labels, (size_t)nlabels * sizeof *l);
    char le[64];
    l[nlabels].name = "le";
    l[nlabels].value = le;
    uint64_t cum = 0;
    for (int i = 0; i <= nb; i++) {
        cum += counts[i];
        fmt_number(le, sizeof le, i < nb ? bounds[i] : INFINITY);
        st_prom_sample_u64(p, "_bucket", l, nlabels + 1, cum);
    }
    st_prom_sample(p, "_sum", labels, nlabels, sum);
    st_prom_sample_u64(p, "_count", labels, nlabels, cum);
}
