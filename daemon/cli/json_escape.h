/* JSON strings for any bytes (squashctl --json). Valid UTF-8 is written as
 * it is; each byte that is not part of valid UTF-8 is written as \udcXX (XX
 * the byte: the lone low surrogates Python's surrogateescape uses, so
 * os.fsencode(value) gives back the path's bytes); control characters
 * (U+0000-U+001F, U+007F-U+009F) and U+2028/U+2029 as \u00XX / \u20XX; '"'
 * and '\' with a backslash. The output is plain ASCII apart from valid
 * UTF-8 of printable characters. */
#ifndef SQUASH_JSON_ESCAPE_H
#define SQUASH_JSON_ESCAPE_H

#include <stdio.h>

/* Writes s (NULL: empty) as a quoted JSON string. */
void json_write_string(FILE *out, const char *s);

#endif
