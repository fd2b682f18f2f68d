CREATE TABLE "board_agents" (
	"room" text NOT NULL,
	"agent_id" text NOT NULL,
	"capabilities" text NOT NULL,
	"auth" text NOT NULL,
	"key_ref" text,
	"last_seen" text NOT NULL,
	"lost" boolean NOT NULL,
	CONSTRAINT "board_agents_room_agent_id_pk" PRIMARY KEY("room","agent_id")
);
--> statement-breakpoint
CREATE TABLE "discrepancies" (
	"room" text NOT NULL,
	"id" integer NOT NULL,
	"thread_id" integer,
	"description" text NOT NULL,
	"severity" text NOT NULL,
	"source_msg_id" integer,
	"recorded_by" text NOT NULL,
	"status" text NOT NULL,
	"resolved_by" text,
	"created_at" text NOT NULL,
	"resolved_at" text,
	CONSTRAINT "discrepancies_room_id_pk" PRIMARY KEY("room","id")
);
--> statement-breakpoint
CREATE TABLE "events" (
	"room" text NOT NULL,
	"seq" integer NOT NULL,
	"ts" text NOT NULL,
	"type" text NOT NULL,
	"actor" text NOT NULL,
	"payload" text NOT NULL,
	"server" text NOT NULL,
	"prev" text NOT NULL,
	"sig" text,
	"leaf_hash" text NOT NULL,
	"checkpoint" text NOT NULL,
	CONSTRAINT "events_room_seq_pk" PRIMARY KEY("room","seq")
);
--> statement-breakpoint
CREATE TABLE "handshakes" (
	"room" text NOT NULL,
	"id" integer NOT NULL,
	"agent_id" text NOT NULL,
	"context_hash" text NOT NULL,
	"auth" text NOT NULL,
	"pubkey_hex" text,
	"signature_hex" text,
	"ts" text,
	"nonce" text,
	"created_at" text NOT NULL,
	CONSTRAINT "handshakes_room_id_pk" PRIMARY KEY("room","id")
);
--> statement-breakpoint
CREATE TABLE "job_leases" (
	"name" text PRIMARY KEY NOT NULL,
	"holder" text NOT NULL,
	"until_ms" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"room" text NOT NULL,
	"seq" integer NOT NULL,
	"agent_id" text NOT NULL,
	"text" text NOT NULL,
	"ts" text NOT NULL,
	"reply_to" integer,
	"auth" text NOT NULL,
	"key_ref" text,
	"pubkey_hex" text,
	"signature_hex" text,
	"ts_iso" text,
	"memory_root" text,
	"hash" text NOT NULL,
	CONSTRAINT "messages_room_seq_pk" PRIMARY KEY("room","seq")
);
--> statement-breakpoint
CREATE UNLOGGED TABLE "rate_buckets" (
	"key" text PRIMARY KEY NOT NULL,
	"tokens" double precision NOT NULL,
	"updated_ms" bigint NOT NULL,
	"taken" boolean NOT NULL
);
--> statement-breakpoint
CREATE TABLE "revisions" (
	"room" text NOT NULL,
	"id" integer NOT NULL,
	"thread_id" integer NOT NULL,
	"kind" text NOT NULL,
	"value" text NOT NULL,
	"author_agent_id" text NOT NULL,
	"auth" text NOT NULL,
	"via" text NOT NULL,
	"source_msg_id" integer,
	"quote" text,
	"created_at" text NOT NULL,
	CONSTRAINT "revisions_room_id_pk" PRIMARY KEY("room","id")
);
--> statement-breakpoint
CREATE TABLE "room_agents" (
	"room" text NOT NULL,
	"agent_id" text NOT NULL,
	"first_seq" integer NOT NULL,
	"pubkey_hex" text,
	CONSTRAINT "room_agents_room_agent_id_pk" PRIMARY KEY("room","agent_id")
);
--> statement-breakpoint
CREATE TABLE "rooms" (
	"uuid" text PRIMARY KEY NOT NULL,
	"description" text NOT NULL,
	"is_public" boolean NOT NULL,
	"protocol_mode" text NOT NULL,
	"mode" text NOT NULL,
	"status" text NOT NULL,
	"owner_token_hash" text NOT NULL,
	"created_at" text NOT NULL,
	"last_activity_at" text NOT NULL,
	"expires_at" text NOT NULL,
	"message_count" integer NOT NULL,
	"agent_count" integer NOT NULL,
	"head_size" integer NOT NULL,
	"head_leaf" text NOT NULL,
	"head_root" text NOT NULL,
	"frontier" text NOT NULL,
	"checkpoint" text NOT NULL,
	"arbiter_watermark" integer DEFAULT 0 NOT NULL,
	"arbiter_calls" integer DEFAULT 0 NOT NULL,
	"arbiter_tokens" integer DEFAULT 0 NOT NULL,
	"arbiter_items" integer DEFAULT 0 NOT NULL,
	"last_extraction_error" text
);
--> statement-breakpoint
CREATE TABLE "signature_nonces" (
	"room" text NOT NULL,
	"pubkey_hex" text NOT NULL,
	"nonce" text NOT NULL,
	"seq" integer NOT NULL,
	CONSTRAINT "signature_nonces_room_pubkey_hex_nonce_pk" PRIMARY KEY("room","pubkey_hex","nonce")
);
--> statement-breakpoint
CREATE TABLE "tasks" (
	"room" text NOT NULL,
	"id" integer NOT NULL,
	"status" text NOT NULL,
	"priority" integer NOT NULL,
	"claimant" text,
	"lease_until" text,
	"lease_hash" text,
	"data" text NOT NULL,
	CONSTRAINT "tasks_room_id_pk" PRIMARY KEY("room","id")
);
--> statement-breakpoint
CREATE TABLE "threads" (
	"room" text NOT NULL,
	"id" integer NOT NULL,
	"subject" text NOT NULL,
	"subject_key" text NOT NULL,
	"current_value" text NOT NULL,
	"status" text NOT NULL,
	"opened_by" text NOT NULL,
	"opened_by_auth" text NOT NULL,
	"opener_key" text,
	"revisions_count" integer NOT NULL,
	"last_revision" text NOT NULL,
	"confirmations" text NOT NULL,
	"created_at" text NOT NULL,
	"updated_at" text NOT NULL,
	CONSTRAINT "threads_room_id_pk" PRIMARY KEY("room","id")
);
--> statement-breakpoint
CREATE TABLE "turn_rooms" (
	"room" text PRIMARY KEY NOT NULL,
	"status" text NOT NULL,
	"data" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "turns" (
	"room" text NOT NULL,
	"id" integer NOT NULL,
	"agent_id" text NOT NULL,
	"status" text NOT NULL,
	"deadline" text,
	"lease_hash" text,
	"data" text NOT NULL,
	CONSTRAINT "turns_room_id_pk" PRIMARY KEY("room","id")
);
--> statement-breakpoint
ALTER TABLE "board_agents" ADD CONSTRAINT "board_agents_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "discrepancies" ADD CONSTRAINT "discrepancies_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "handshakes" ADD CONSTRAINT "handshakes_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "revisions" ADD CONSTRAINT "revisions_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "room_agents" ADD CONSTRAINT "room_agents_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "signature_nonces" ADD CONSTRAINT "signature_nonces_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "threads" ADD CONSTRAINT "threads_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "turn_rooms" ADD CONSTRAINT "turn_rooms_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "turns" ADD CONSTRAINT "turns_room_rooms_uuid_fk" FOREIGN KEY ("room") REFERENCES "public"."rooms"("uuid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "board_agents_seen" ON "board_agents" USING btree ("last_seen") WHERE NOT lost;--> statement-breakpoint
CREATE INDEX "revisions_thread" ON "revisions" USING btree ("room","thread_id");--> statement-breakpoint
CREATE INDEX "rooms_public_activity" ON "rooms" USING btree ("last_activity_at") WHERE is_public;--> statement-breakpoint
CREATE INDEX "rooms_public_created" ON "rooms" USING btree ("created_at") WHERE is_public;--> statement-breakpoint
CREATE INDEX "rooms_public_messages" ON "rooms" USING btree ("message_count") WHERE is_public;--> statement-breakpoint
CREATE INDEX "rooms_public_agents" ON "rooms" USING btree ("agent_count") WHERE is_public;--> statement-breakpoint
CREATE INDEX "rooms_expires" ON "rooms" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "tasks_open" ON "tasks" USING btree ("room","status","priority","id");--> statement-breakpoint
CREATE INDEX "tasks_lease" ON "tasks" USING btree ("lease_until") WHERE status = 'claimed';--> statement-breakpoint
CREATE INDEX "turns_due" ON "turns" USING btree ("deadline") WHERE status IN ('ready', 'claimed');