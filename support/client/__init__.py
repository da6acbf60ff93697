"""The model client's layers: each a `Sender` (support/client/sending.py) with one job, wrapping
the next; `ModelClient` (support/engine.py) assembles them for one model, outermost first:

    API, reference:  Caching -> Timed -> Limited -> Capped -> BackendCall(backend.generate)
    local engines:   Caching -> Timed -> Capped -> BackendCall(MicroBatcher.submit)
    --batch:         Caching -> Capped -> Queued(BatchQueue)

(`Capped` only under `--max-cost`; "local engines": backends with `max_batch`.)

- `Caching` (caching.py): the cached answer, else the inner layer's, stored through an
  `AnswerCache` (a failing write costs the cache entry, never the answer); errors are never stored
  and reach the caller as `BackendError`. Before the window opens it tells the `Admission` of its
  lookup (admission.py: the window of cases evaluating at once).
- `Timed` (sending.py): an answer its backend did not time gets the time the request waited here.
- `Limited` (limiting.py): at most a fixed number of requests in flight, or what the AIMD
  controller (support/concurrency.py) allows.
- `Capped` (capping.py): within the `--max-cost` caps (support/spending.py), only when there are.
- `BackendCall` (sending.py): the call itself, counted (sent, in flight, peak); it tells the
  controller each answer's latency.
- `MicroBatcher` (micro_batching.py): the requests waiting at one moment as one
  `Backend.generate_batch` call.
- `Queued` (batch_api.py): the provider's batch API (support/batches.py); the queue stores the
  answers it collects itself, so `Caching` stores nothing on that path and nothing is timed.

Every layer runs on the engine's one event loop: no locks.
"""
