import type { Stats } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { HttpError } from "../http/errors.js";
import type { RouteRequest } from "../http/routes.js";
import { evaluatePreconditions } from "./conditional.js";
import { sniffContentType, typeByExtension } from "./content-type.js";
import { byteRanges, planMultipart, RangeNotSatisfiable, type ByteRange } from "./ranges.js";
import { headerValue } from "./request.js";
import { sendBody as send } from "./send.js";

const SNIFF_BYTES = 512;

/**
 * Serves a file without content coding, with Go ServeContent semantics: Last-Modified,
 * preconditions (304/412), Content-Type from the raw path or sniffed, byte ranges (206, 416).
 * A file whose size is unknown (procfs, devices) streams until EOF without a length or ranges.
 */
export async function serveIdentity(r: RouteRequest, fh: FileHandle, st: Stats, raw: string): Promise<void> {
  const { res } = r;
  res.setHeader("Last-Modified", new Date(st.mtimeMs).toUTCString());
  const pre = evaluatePreconditions(
    {
      ifMatch: headerValue(r, "if-match"),
      ifUnmodifiedSince: headerValue(r, "if-unmodified-since"),
      ifNoneMatch: headerValue(r, "if-none-match"),
      ifModifiedSince: headerValue(r, "if-modified-since"),
      ifRange: headerValue(r, "if-range"),
      range: headerValue(r, "range"),
    },
    st.mtimeMs,
  );
  if (pre.status === 412) throw new HttpError(412, "precondition failed");
  if (pre.status === 304) {
    res.statusCode = 304;
    res.end();
    return;
  }

  // Read the head through the file position so pipes and character devices work too.
  const head = Buffer.alloc(SNIFF_BYTES);
  const { bytesRead } = await fh.read(head, 0, SNIFF_BYTES, null);
  const first = head.subarray(0, bytesRead);
  const type = typeByExtension(raw) ?? sniffContentType(first);
  res.setHeader("Content-Type", type);

  const sized = st.isFile() && !(st.size === 0 && bytesRead > 0);
  if (!sized) {
    res.statusCode = 200;
    await send(res, async (out) => {
      if (first.length) await out.write(first);
      await out.copy(fh);
    });
    return;
  }

  const size = st.size;
  res.setHeader("Accept-Ranges", "bytes");
  let ranges: ByteRange[] | undefined;
  if (pre.range) {
    try {
      ranges = byteRanges(pre.range, size);
    } catch (err) {
      if (err instanceof RangeNotSatisfiable) res.setHeader("Content-Range", `bytes */${size}`);
      throw err;
    }
  }
  if (!ranges) {
    res.setHeader("Content-Length", size);
    res.statusCode = 200;
    await send(res, (out) => out.copy(fh, 0, size - 1));
  } else if (ranges.length === 1) {
    const [{ start, end }] = ranges;
    res.setHeader("Content-Range", `bytes ${start}-${end}/${size}`);
    res.setHeader("Content-Length", end - start + 1);
    res.statusCode = 206;
    await send(res, (out) => out.copy(fh, start, end));
  } else {
    const plan = planMultipart(ranges, size, type);
    res.setHeader("Content-Type", plan.contentType);
    res.setHeader("Content-Length", plan.length);
    res.statusCode = 206;
    await send(res, async (out) => {
      for (const { head, range } of plan.parts) {
        await out.write(Buffer.from(head));
        await out.copy(fh, range.start, range.end);
      }
      await out.write(Buffer.from(plan.tail));
    });
  }
}
