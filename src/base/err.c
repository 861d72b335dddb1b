/* err.c — messages and names for Strata's error codes. */
#include "base/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const st_err_msgs[] = {
#define ST_ERR_MSG(name, msg) msg,
    ST_ERRORS(ST_ERR_MSG)
#undef ST_ERR_MSG
};

static const char *const st_err_names[] = {
#define ST_ERR_NAME(name, msg) #name,
    ST_ERRORS(ST_ERR_NAME)
#undef ST_ERR_NAME
};

static int st_err_index(int err)
{
    if (err <= ST_E__FIRST || err >= ST_E__LAST)
        return -1;
    return err - ST_E__FIRST - 1;
}

const char *st_strerror(int err)
{
    if (err == 0)
        return "success";
    int i = st_err_index(err);
    if (i >= 0)
        return st_err_msgs[i];
    if (err < 0)
        return strerror(-err);
    return "unknown error";
}

const char *st_errname(int err)
{
    if (err == 0)
        return "OK";
    int i = st_err_index(err);
    if (i >= 0)
        return st_err_names[i];
    if (err < 0) {
        const char *n = strerrorname_np(-err);
        if (n)
            return n;
    }
    return "UNKNOWN";
}
