/*
 * prom.h — a writer for the Prometheus text exposition format, version 0.0.4.
 *
 * Output, one metric family at a time (every sample of a family follows its HELP and TYPE
 * lines, as the format requires):
 *
 *   # HELP strata_kafka_requests_total Requests handled, by API.
 *   # TYPE strata_kafka_requests_total counter
 *   strata_kafka_requests_total{api="Produce"} 42
 *   # HELP strata_kafka_request_duration_seconds ...
 *   # TYPE strata_kafka_request_duration_seconds histogram
 *   strata_kafka_request_duration_seconds_bucket{api="Produce",le="0.001"} 40
 *   strata_kafka_request_duration_seconds_bucket{api="Produce",le="+Inf"} 42
 *   strata_kafka_request_duration_seconds_sum{api="Produce"} 0.031
 *   strata_kafka_request_duration_seconds_count{api="Produce"} 42
 *
 * Escaping: label values escape backslash, double quote and newline (\\ \" \n); HELP text
 * escapes backslash and newline. Values: integers exactly, other numbers with 17 significant
 * digits, infinities as +Inf/-Inf, NaN as NaN. Histogram buckets are given per bucket and
 * written cumulatively, ending with le="+Inf" equal to _count.
 *
 * Threads: a writer belongs to the thread using it; nothing here is shared.
 */
#ifndef ST_ADMIN_PROM_H
#define ST_ADMIN_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct st_prom_label {
    const char *name;
    const char *value;
} st_prom_label_t;

typedef struct st_prom {
    st_buf_t *out;
    const char *family; /* the family being written */
} st_prom_t;

void st_prom_init(st_prom_t *p, st_buf_t *out);
/* Starts a family: HELP and TYPE lines. type: "counter", "gauge", "histogram", "untyped". */
void st_prom_family(st_prom_t *p, const char *name, const char *type, const char *help);
/* One sample of the current family; suffix ("" or "_bucket"...) follows the family name. */
void st_prom_sample(st_prom_t *p, const char *suffix, const st_prom_label_t *labels, int nlabels,
                    double value);
void st_prom_sample_u64(st_prom_t *p, const char *suffix, const st_prom_label_t *labels,
                        int nlabels, uint64_t value);
/*
 * One histogram series of the current family. bounds[0..nb) are the upper bounds in
 * increasing order; counts[0..nb] the observations per bucket, counts[nb] those above the
 * last bound (not cumulative). Writes nb + 1 cumulative _bucket lines, _sum and _count.
 * At most 6 labels.
 */
void st_prom_histogram(st_prom_t *p, const st_prom_label_t *labels, int nlabels,
                       const double *bounds, const uint64_t *counts, int nb, double sum);

/* Appends a label value with Prometheus escaping (exposed for tests). */
void st_prom_escape_label(st_buf_t *out, const char *v);
/* Appends a number as the format spells it. */
void st_prom_number(st_buf_t *out, double v);

#endif
