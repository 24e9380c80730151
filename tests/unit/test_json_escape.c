/* squashctl's JSON strings: valid UTF-8 as it is, every other byte as
 * \udcXX, control characters escaped (daemon/cli/json_escape.h). */
#include "config.h"

#include <stdlib.h>

#include "cli/json_escape.h"
#include "unit.h"

static char *escaped(const char *s)
{
	static char buf[1024];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	json_write_string(f, s);
	fclose(f);
	return buf;
}

int main(void)
{
	CHECK_STR(escaped("/plain/path.sqfs"), "\"/plain/path.sqfs\"");
	CHECK_STR(escaped(NULL), "\"\"");
	CHECK_STR(escaped("a\"b\\c"), "\"a\\\"b\\\\c\"");
	/* Control characters, DEL and C1 controls. */
	CHECK_STR(escaped("\x01\t\n\x1f\x7f"), "\"\\u0001\\u0009\\u000a\\u001f\\u007f\"");
	CHECK_STR(escaped("\xc2\x85"), "\"\\u0085\"");
	/* Valid UTF-8 passes: 2, 3 and 4 bytes. */
	CHECK_STR(escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
	/* Line and paragraph separators are escaped (JavaScript). */
	CHECK_STR(escaped("\xe2\x80\xa8\xe2\x80\xa9"), "\"\\u2028\\u2029\"");
	/* Bytes that are not UTF-8: one \udcXX each. */
	CHECK_STR(escaped("bad\xffname"), "\"bad\\udcffname\"");
	CHECK_STR(escaped("\x80\xbf"), "\"\\udc80\\udcbf\"");
	/* Overlong forms, surrogates, beyond U+10FFFF, invalid lead bytes. */
	CHECK_STR(escaped("\xc0\xaf"), "\"\\udcc0\\udcaf\"");
	CHECK_STR(escaped("\xe0\x80\xaf"), "\"\\udce0\\udc80\\udcaf\"");
	CHECK_STR(escaped("\xed\xa0\x80"), "\"\\udced\\udca0\\udc80\"");
	CHECK_STR(escaped("\xf4\x90\x80\x80"), "\"\\udcf4\\udc90\\udc80\\udc80\"");
	CHECK_STR(escaped("\xf8\x88\x80\x80\x80"), "\"\\udcf8\\udc88\\udc80\\udc80\\udc80\"");
	/* A sequence cut short by the end of the string or by ASCII. */
	CHECK_STR(escaped("x\xe2\x82"), "\"x\\udce2\\udc82\"");
	CHECK_STR(escaped("\xe2" "A"), "\"\\udce2A\"");
	/* The highest valid code point passes. */
	CHECK_STR(escaped("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"");
	return unit_exit_code();
}
