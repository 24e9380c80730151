/* Writing a reason into a caller's (err, errlen) buffer, the error
 * convention of every proto/ function. Internal to libsquashcommon. */
#ifndef SQUASH_ERRMSG_H
#define SQUASH_ERRMSG_H

#include <stddef.h>

/* snprintf into err; does nothing when err is NULL or errlen is 0, so
 * callers that do not want the reason may pass NULL. */
void squash_errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* True when s holds a byte below 0x20 or DEL: such bytes would let a path
 * forge lines in logs and in the messages shown to users. */
int squash_has_control_char(const char *s);

#endif
