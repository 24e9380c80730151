/* UTF-8 validation shared by squashctl's JSON strings and squashd's log
 * lines (paths are bytes; readers of both expect text). */
#ifndef SQUASH_UTF8_H
#define SQUASH_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1-4) of the valid UTF-8 sequence at p, or 0 when p starts none
 * (overlong forms, surrogates and code points above U+10FFFF are invalid,
 * RFC 3629). Reads no further than a NUL byte. *cp gets the code point. */
size_t utf8_sequence(const unsigned char *p, uint32_t *cp);

#endif
