"""The model side between a case and its backend: the model client's layers, and beside them
the policies they apply. The layers: each a `Sender` (support/client/sending.py) with one job,
wrapping the next; `ModelClient` (support/client/engine.py) assembles them for one model, outermost
first:

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
  controller (support/client/concurrency.py) allows.
- `Capped` (capping.py): within the `--max-cost` caps (support/client/spending.py), only when there
are.
- `BackendCall` (sending.py): the call itself, counted (sent, in flight, peak); it tells the
  controller each answer's latency.
- `MicroBatcher` (micro_batching.py): the requests waiting at one moment as one
  `Backend.generate_batch` call.
- `Queued` (queueing.py): the provider's batch API (support/client/batch_queue.py); the queue stores
the
  answers it collects itself, so `Caching` stores nothing on that path and nothing is timed.

Every layer runs on the engine's one event loop: no locks.

The policies: the response cache (response_cache.py), adaptive concurrency (concurrency.py), the
spending caps (spending.py), the batch queue (batch_queue.py) and what a dry run would send and
cost (dry_run.py). engine.py runs the cases' coroutines on that loop and assembles each model's
client.
"""
