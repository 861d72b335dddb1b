/*
 * handlers.c — the table of implemented APIs: what ApiVersions advertises and what dispatch
 * accepts. A version range here must be implemented in full by its handler.
 */
#include "kafka/broker.h"

const st_khandler_t st_khandlers[] = {
    {ST_KP_API_API_VERSIONS, 0, 4, st_kh_api_versions},
    {ST_KP_API_METADATA, 0, 12, st_kh_metadata},
};
const int st_nkhandlers = (int)(sizeof st_khandlers / sizeof st_khandlers[0]);
