#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "errmsg.h"
#include "quote.h"

void squash_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int squash_has_control_char(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (squash_is_control(c))
			return 1;
	}
	return 0;
}
