/*
 * time.c: RFC 3339 times, as a condition's times are written.
 */

#include "../nodestatus.h"

#include <stdio.h>
#include <time.h>

char *ns_rfc3339(int64_t secs, char buf[NS_TIME_MAX]) {
    /* Howard Hinnant's civil_from_days, proleptic Gregorian, UTC. */
    int64_t days = secs / 86400, rem = secs % 86400;
    if (rem < 0) rem += 86400, days -= 1;
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    if (y < 0) y = 0; /* RFC 3339 years are 0000..9999 */
    if (y > 9999) y = 9999;
    snprintf(buf, NS_TIME_MAX, "%04d-%02d-%02dT%02d:%02d:%02dZ", (int)y, (int)m, (int)d, (int)(rem / 3600),
             (int)(rem / 60 % 60), (int)(rem % 60));
    return buf;
}

char *ns_now(char buf[NS_TIME_MAX]) { return ns_rfc3339((int64_t)time(NULL), buf); }
