#include "config.h"
#include "cli/json_escape.h"

#include <stddef.h>
#include <stdint.h>

#include "util/utf8.h"

void json_write_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', out);
	while (*p) {
		uint32_t cp;
		size_t len = utf8_sequence(p, &cp);

		if (len == 0) {
			fprintf(out, "\\udc%02x", *p);
			p++;
			continue;
		}
		if (cp == '"' || cp == '\\')
			fprintf(out, "\\%c", (int)cp);
		else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029)
			fprintf(out, "\\u%04x", (unsigned)cp);
		else
			fwrite(p, 1, len, out);
		p += len;
	}
	fputc('"', out);
}
