#!/usr/bin/env python3
"""Write the rpc transcript cases (one directory each) next to this file.

The expected output is written here by hand from the JSON-RPC 2.0 rules and
the documented session behaviour (include/acp/rpc.h), never captured from the
implementation. Inputs with invalid UTF-8 are given as bytes. Rerun after
editing: python3 tests/transcripts/rpc/generate.py
"""
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))


def res(id_, result):
    return '{"jsonrpc":"2.0","id":%s,"result":%s}' % (id_, result)


def err(id_, code, msg, data=None):
    s = '{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"%s"' % (
        id_, code, msg)
    if data is not None:
        s += ',"data":%s' % data
    return s + '}}'


def inv(id_, why):
    return err(id_, -32600, "Invalid Request", '"%s"' % why)


PARSE = err("null", -32700, "Parse error")
NOTFOUND = lambda id_: err(id_, -32601, "Method not found")


def req(id_, method, params=None):
    s = '{"jsonrpc":"2.0","id":%s,"method":"%s"' % (id_, method)
    if params is not None:
        s += ',"params":%s' % params
    return s + '}'


def note(method, params=None):
    s = '{"jsonrpc":"2.0","method":"%s"' % method
    if params is not None:
        s += ',"params":%s' % params
    return s + '}'


CASES = {}


def case(name, desc, inp, expect, **files):
    if isinstance(inp, list):
        inp = "".join(l + "\n" for l in inp)
    if isinstance(inp, str):
        inp = inp.encode()
    CASES[name] = (desc, inp, "".join(l + "\n" for l in expect), files)


case("echo_basic", "requests answered with their params",
     [req(1, "echo", "[1,2]"), req(2, "echo", '{"a":{"b":[true,null]}}'),
      req(3, "echo")],
     [res(1, "[1,2]"), res(2, '{"a":{"b":[true,null]}}'), res(3, "null")])

case("ids_all_types", "ids echoed with their exact original bytes",
     [req(0, "echo"), req(-1, "echo"), req("12345678901234567890", "echo"),
      req("1.5", "echo"), req("1E+3", "echo"), req("-0.0", "echo"),
      req('"abc"', "echo"), req('"a\\u00e9\\n\\"b"', "echo"),
      req('""', "echo"), req("null", "echo"),
      req("123456789012345678901234567890.000000000000000000001", "echo")],
     [res(0, "null"), res(-1, "null"), res("12345678901234567890", "null"),
      res("1.5", "null"), res("1E+3", "null"), res("-0.0", "null"),
      res('"abc"', "null"), res('"a\\u00e9\\n\\"b"', "null"),
      res('""', "null"), res("null", "null"),
      res("123456789012345678901234567890.000000000000000000001", "null")])

case("id_whitespace_and_key_order", "raw id without surrounding whitespace",
     ['{ "method" : "echo" , "params" : [ 1 ] , "id" :  7 , "jsonrpc":"2.0" }'],
     [res(7, "[ 1 ]")])

case("notifications_ignored", "notifications never get an answer",
     [note("echo", "[1]"), note("unknown"), note("defer"), note("error", "{}"),
      req(1, "echo", "[]")],
     [res(1, "[]")])

case("method_not_found", "unknown methods answered -32601 by the handler",
     [req(1, "nope"), req('"x"', "session/prompt", "{}")],
     [NOTFOUND(1), NOTFOUND('"x"')])

case("error_responses", "error objects: any code, optional data",
     [req(1, "error", '{"code":-32000,"message":"Auth required"}'),
      req(2, "error",
          '{"code":42,"message":"tab\\there \\u00e9","data":{"k":[1,"2"]}}'),
      req(3, "error", '{"code":-9223372036854775808,"message":"","data":null}')],
     [err(1, -32000, "Auth required"),
      err(2, 42, "tab\\there \u00e9", '{"k":[1,"2"]}'),
      err(3, -9223372036854775808, "", "null")])

case("parse_error_truncated", "unterminated JSON answered -32700 id null",
     ['{"jsonrpc":"2.0","id":1,"method":"echo"', '{"jsonrpc":"2.0","id":1,',
      req(2, "echo")],
     [PARSE, PARSE, res(2, "null")])

case("parse_error_garbage", "non-JSON lines",
     ["hello", "{]", '{"a":1,}', "[1,]", "'x'", "NaN", "{} {}", "\x01",
      req(3, "echo")],
     [PARSE] * 8 + [res(3, "null")])

case("invalid_utf8", "invalid UTF-8 anywhere is a parse error",
     b'{"jsonrpc":"2.0","id":1,"method":"echo","params":["\xff"]}\n'
     b'{"jsonrpc":"2.0","id":2,"method":"ech\xc0\xaf"}\n'
     b'{"jsonrpc":"2.0","id":3,"method":"echo","params":["\xed\xa0\x80"]}\n'
     b'{"jsonrpc":"2.0","id":4,"method":"echo","params":["\xe2\x82"]}\n'
     b'\xef\xbb\xbf{"jsonrpc":"2.0","id":5,"method":"echo"}\n'
     b'{"jsonrpc":"2.0","id":6,"method":"echo","params":["\xc3\xa9\xf0\x9f\x98\x80"]}\n',
     [PARSE, PARSE, PARSE, PARSE, PARSE,
      res(6, '["\u00e9\U0001F600"]')])

case("not_an_object", "a JSON text that is not an object or array",
     ["1", '"str"', "null", "true"],
     [inv("null", "message must be an object")] * 4)

case("invalid_id_type", "ids must be string, number or null",
     [req("{}", "echo"), req("[1]", "echo"), req("true", "echo"),
      note("echo")[:-1] + ',"id":false}'],
     [inv("null", "id must be a string, number or null")] * 4)

case("bad_jsonrpc", "jsonrpc must be the string 2.0; id echoed when usable",
     ['{"jsonrpc":"1.0","id":1,"method":"echo"}',
      '{"id":"x","method":"echo"}',
      '{"jsonrpc":2.0,"id":3,"method":"echo"}',
      '{"jsonrpc":"2.0 ","id":4,"method":"echo"}',
      '{"jsonrpc":"1.0","method":"echo"}',
      '{"jsonrpc":"1.0","id":{},"method":"echo"}'],
     [inv(1, 'jsonrpc must be \\"2.0\\"'),
      inv('"x"', 'jsonrpc must be \\"2.0\\"'),
      inv(3, 'jsonrpc must be \\"2.0\\"'),
      inv(4, 'jsonrpc must be \\"2.0\\"'),
      inv("null", 'jsonrpc must be \\"2.0\\"'),
      inv("null", "id must be a string, number or null")])

case("missing_method", "no method, no result, no error",
     ['{"jsonrpc":"2.0","id":1}', '{"jsonrpc":"2.0"}', '{}'],
     [inv(1, "method is missing"), inv("null", "method is missing"),
      inv("null", 'jsonrpc must be \\"2.0\\"')])

case("method_not_string", "method must be a string",
     ['{"jsonrpc":"2.0","id":1,"method":1}',
      '{"jsonrpc":"2.0","id":2,"method":null}',
      '{"jsonrpc":"2.0","method":["echo"]}'],
     [inv(1, "method must be a string"), inv(2, "method must be a string"),
      inv("null", "method must be a string")])

case("params_not_structured", "params must be an object or array",
     [req(1, "echo", "1"), req(2, "echo", '"s"'), req(3, "echo", "true"),
      req(4, "echo", "null"), note("echo", "2")],
     [inv(i, "params must be an object or an array") for i in (1, 2, 3, 4)] +
     [inv("null", "params must be an object or an array")])

case("batch_mixed", "a batch answered with one array, invalid elements too",
     ["[" + ",".join([req(1, "echo", "[1]"), note("echo"), "1",
                      req(2, "nope"), '{"jsonrpc":"2.0","id":3}',
                      req(4, "error", '{"code":5,"message":"m"}')]) + "]"],
     ["[" + ",".join([res(1, "[1]"), inv("null", "message must be an object"),
                      NOTFOUND(2), inv(3, "method is missing"),
                      err(4, 5, "m")]) + "]"])

case("batch_empty", "an empty array is one -32600, not an array",
     ["[]", " [ ] ", req(1, "echo")],
     [inv("null", "empty batch"), inv("null", "empty batch"), res(1, "null")])

case("batch_nested", "nested arrays are invalid elements",
     ["[[]]", "[[" + req(1, "echo") + "]," + req(2, "echo") + "]"],
     ["[" + inv("null", "nested batch") + "]",
      "[" + inv("null", "nested batch") + "," + res(2, "null") + "]"])

case("batch_invalid_elements", "the JSON-RPC 2.0 spec example [1,2,3]",
     ["[1,2,3]"], ["[" + ",".join([inv("null", "message must be an object")] * 3)
                   + "]"])

case("batch_notifications_only", "a batch without requests sends nothing",
     ["[" + note("echo") + "," + note("x", "[]") + "]",
      "[" + '{"jsonrpc":"2.0","id":9,"result":1}' + "]", req(1, "echo")],
     [res(1, "null")])

case("batch_deferred", "the array waits for answers given later",
     ["[" + req(1, "defer", "[1]") + "," + req(2, "echo", "[2]") + "]",
      req(3, "echo", "[3]"),
      "[" + req(4, "defer") + "," + req(5, "defer", "{}") + "]"],
     [res(3, "[3]"), "[" + res(2, "[2]") + "," + res(1, "[1]") + "]",
      "[" + res(4, "null") + "," + res(5, "{}") + "]"])

case("defer_order", "deferred answers come after the rest of the input",
     [req(1, "defer", "[1]"), req(2, "echo", "[2]"), req(3, "defer", "[3]")],
     [res(2, "[2]"), res(1, "[1]"), res(3, "[3]")])

case("batches_off", "with batches off an array is one -32600",
     ["[" + req(1, "echo") + "]", req(2, "echo")],
     [inv("null", "batches are not supported"), res(2, "null")], batches="0")

case("unknown_responses", "responses to ids never sent are not answered",
     ['{"jsonrpc":"2.0","id":0,"result":1}',
      '{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"x"}}',
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"P"}}',
      '{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1}}',
      '{"jsonrpc":"2.0","result":1}',
      '{"jsonrpc":"1.0","id":1,"result":1}',
      '{"jsonrpc":"2.0","id":{},"result":1}',
      req(1, "echo")],
     [res(1, "null")])

case("oversize_line", "a line over max_line is skipped and answered",
     [req(1, "echo", '["' + "x" * 100 + '"]'), req(2, "echo"),
      "x" * 65, "x" * 64, req(3, "echo", '["xxxxxxxxxx"]')],
     [err("null", -32600, "Message exceeds 64 bytes"), res(2, "null"),
      err("null", -32600, "Message exceeds 64 bytes"), PARSE,
      res(3, '["xxxxxxxxxx"]')], max_line="64")

case("crlf", "CRLF line endings are accepted",
     (req(1, "echo", "[1]") + "\r\n" + req(2, "echo") + "\r\n\r\n" +
      "[" + req(3, "echo") + "]\r\n").encode(),
     [res(1, "[1]"), res(2, "null"), "[" + res(3, "null") + "]"])

case("blank_lines", "empty and whitespace-only lines are ignored",
     "\n\n   \n\t\n \r\n" + req(1, "echo") + "\n\n",
     [res(1, "null")])

case("cancel_deferred", "$/cancel_request answers a pending request -32800",
     [req('"r1"', "defer", "[1]"), req(2, "defer"),
      note("$/cancel_request", '{"requestId":"r\\u0031"}'),
      note("$/cancel_request", '{"requestId":99}'),
      note("$/cancel_request", '{"requestId":2.0}')],
     [err('"r1"', -32800, "Request cancelled"), err(2, -32800,
                                                     "Request cancelled")])

case("duplicate_and_escaped_keys", "first duplicate wins; keys are decoded",
     ['{"jsonrpc":"2.0","id":1,"id":2,"method":"echo"}',
      '{"jsonrp\\u0063":"2.0","\\u0069d":3,"m\\u0065thod":"echo","params":[3]}',
      '{"jsonrpc":"2.0","id":4,"method":"\\u0065cho"}'],
     [res(1, "null"), res(3, "[3]"), res(4, "null")])

case("too_deep", "nesting beyond the depth limit is a parse error",
     [req(1, "echo", "[" * 600 + "]" * 600), req(2, "echo", "[" * 100 +
                                                     "]" * 100)],
     [PARSE, res(2, "[" * 100 + "]" * 100)])

case("no_trailing_newline", "a partial last line is dropped at EOF",
     (req(1, "echo") + "\n" + req(2, "echo")).encode(),
     [res(1, "null")])


def main():
    for name in sorted(os.listdir(HERE)):
        p = os.path.join(HERE, name)
        if os.path.isdir(p):
            shutil.rmtree(p)
    for name, (desc, inp, expect, files) in CASES.items():
        d = os.path.join(HERE, name)
        os.makedirs(d)
        with open(os.path.join(d, "in.jsonl"), "wb") as f:
            f.write(inp)
        with open(os.path.join(d, "expect.jsonl"), "wb") as f:
            f.write(expect.encode())
        with open(os.path.join(d, "case.txt"), "w") as f:
            f.write(desc + "\n")
        for k, v in files.items():
            with open(os.path.join(d, k), "w") as f:
                f.write(v + "\n")
    print("wrote %d cases" % len(CASES))


if __name__ == "__main__":
    main()
