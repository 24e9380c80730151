/* UTF-8 sequences (utf8.h). */
#include "config.h"

#include "utf8_text.h"

size_t squash_utf8_sequence(const unsigned char *p, size_t n, uint32_t *cp)
{
	unsigned char b = n ? p[0] : 0;
	size_t len;
	unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */

	if (!n)
		return 0;
	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	if (b >= 0xC2 && b <= 0xDF) {
		len = 2;
		*cp = b & 0x1F;
	} else if (b >= 0xE0 && b <= 0xEF) {
		len = 3;
		*cp = b & 0x0F;
		if (b == 0xE0)
			lo = 0xA0; /* overlong */
		else if (b == 0xED)
			hi = 0x9F; /* surrogates */
	} else if (b >= 0xF0 && b <= 0xF4) {
		len = 4;
		*cp = b & 0x07;
		if (b == 0xF0)
			lo = 0x90; /* overlong */
		else if (b == 0xF4)
			hi = 0x8F; /* above U+10FFFF */
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		unsigned char c = p[i];
		if (c < (i == 1 ? lo : 0x80) || c > (i == 1 ? hi : 0xBF))
			return 0;
		*cp = (*cp << 6) | (c & 0x3F);
	}
	return len;
}

size_t squash_utf8_printable(const unsigned char *p, size_t n)
{
	uint32_t cp;
	size_t len = squash_utf8_sequence(p, n, &cp);

	return len > 1 && cp >= 0xA0 ? len : 0;
}
