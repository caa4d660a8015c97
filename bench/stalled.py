"""Opens N connections that send half a request head and then wait, as a slow or hostile
client does; prints how many the server accepted and how many it closed before HOLD seconds.
Usage: stalled.py HOST PORT N HOLD"""
import asyncio
import sys


async def stall(host, port, hold, gate):
    async with gate:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            await writer.drain()
        except OSError:
            return "refused"
    try:
        await asyncio.wait_for(reader.read(1), hold)
        outcome = "closed"
    except asyncio.TimeoutError:
        outcome = "held"
    except OSError:
        outcome = "closed"
    writer.close()
    return outcome


async def main(host, port, n, hold):
    gate = asyncio.Semaphore(2000)  # connects in flight at once, not connections open
    outcomes = await asyncio.gather(*(stall(host, port, hold, gate) for _ in range(n)))
    print(" ".join(f"{k}={outcomes.count(k)}" for k in ("closed", "held", "refused")))


if __name__ == "__main__":
    host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    asyncio.run(main(host, port, n, hold))
