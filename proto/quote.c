#include "config.h"

#include <stdio.h>

#include "quote.h"

static size_t quoted_length(const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += squash_is_control((unsigned char)s[i]) ? 4 : 1;
	return n;
}

char *squash_quote(char *out, size_t outlen, const char *s, size_t len)
{
	/* Room for the text; when it does not all fit, room for "..." too. */
	size_t room = quoted_length(s, len) < outlen ? outlen - 1
						     : (outlen > 4 ? outlen - 4 : 0);
	size_t used = 0;
	size_t i;

	if (outlen == 0)
		return out;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (squash_is_control(c)) {
			if (used + 4 > room)
				break;
			snprintf(out + used, outlen - used, "\\x%02x", c);
			used += 4;
		} else {
			if (used + 1 > room)
				break;
			out[used++] = (char)c;
		}
	}
	if (i < len && used + 3 < outlen) {
		out[used++] = '.';
		out[used++] = '.';
		out[used++] = '.';
	}
	out[used] = '\0';
	return out;
}
