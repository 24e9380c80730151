#include "config.h"
#include "util/utf8.h"

#include <string.h>

#include "utf8_text.h"

size_t utf8_sequence(const unsigned char *p, uint32_t *cp)
{
	/* A NUL ends the text: no read beyond it. */
	size_t n = strnlen((const char *)p, 4);

	return squash_utf8_sequence(p, n ? n : 1, cp);
}
